// HSDP (FSDP's HYBRID_SHARD) and FSDP's remaining knobs: the shard and replica groups, zero3's memory formula with
// N = shard_group, the all-reduce of each gradient shard across replicas on its own stream, and what
// forward_prefetch, reshard_after_forward and the wrapping unit change in the step program.
#include <catch2/catch.hpp>

#include <algorithm>
#include <regex>
#include <string>

#include "../source_dir.hpp"
#include "dpsim/advice.hpp"
#include "dpsim/error.hpp"
#include "dpsim/estimate.hpp"
#include "dpsim/groups.hpp"
#include "dpsim/load.hpp"
#include "dpsim/program.hpp"
#include "dpsim/sharding.hpp"
#include "dpsim/sweep_spec.hpp"

using namespace dpsim;

namespace {

std::string src(const std::string& rel) { return std::string(DPSIM_SOURCE_DIR) + "/" + rel; }

// Llama 3.1 70B on 64 H100s (8 nodes of 8), with the given sharding knobs.
Scenario llama70b(std::vector<Override> knobs) {
  return load_scenario(src("scenarios/llama3.1-70b-hsdp-64xh100.yaml"), knobs);
}

Scenario llama8b(std::vector<Override> knobs) {
  return load_scenario(src("scenarios/llama3.1-8b-fsdp-8xh100.yaml"), knobs);
}

std::vector<const CommCall*> calls(const RankProgram& r, CollectiveKind kind, GroupKind group) {
  std::vector<const CommCall*> out;
  for (const CommCall& c : r.comms)
    if (c.kind == kind && c.group == group) out.push_back(&c);
  return out;
}

// The unit_forward event the wait before each forward all-gather of a block names, in order (-1: no wait).
std::vector<int> limiter_waits(const RankProgram& r) {
  std::vector<int> out;
  int pending = -1;
  bool backward = false;
  for (const Instr& in : r.instrs) {
    if (in.type == Instr::Type::mark && in.mark == Mark::forward_end) backward = true;
    if (backward || in.stream != StepProgram::kComm) continue;
    if (in.type == Instr::Type::wait && in.event.kind == EventKind::unit_forward) pending = in.event.index;
    if (in.type == Instr::Type::collective) {
      out.push_back(pending);
      pending = -1;
    }
  }
  return out;
}

}  // namespace

TEST_CASE("HSDP groups: shard groups of consecutive ranks, replica groups at the same position") {
  const ParallelDims d{64, 1, 1, 8};
  CHECK(group_of(13, GroupKind::shard, d).ranks == std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15});
  CHECK(group_of(13, GroupKind::replica, d).ranks == std::vector<int>{5, 13, 21, 29, 37, 45, 53, 61});
  CHECK(groups_of(GroupKind::shard, d).size() == 8);
  CHECK(groups_of(GroupKind::replica, d).size() == 8);
  const GroupPlacement shard = placement(group_of(0, GroupKind::shard, d), d, 8);
  CHECK(shard.intra_node());
  const GroupPlacement replica = placement(group_of(0, GroupKind::replica, d), d, 8);
  CHECK(replica.nodes == 8);
  CHECK(replica.ranks_per_node == 1);
  CHECK(replica.groups_per_node == 8);
  CHECK_THROWS_AS(check_dims(ParallelDims{64, 1, 1, 12}), InputError);
}

TEST_CASE("HSDP memory: zero3's formula with N = shard_group (8 of 64 GPUs)") {
  const Scenario s = llama70b({});
  REQUIRE(s.parallelism.hybrid);
  REQUIRE(s.parallelism.shard_group == 8);
  const StepPlan plan = make_step_plan(s);
  const ModelStateParts parts =
      model_state_parts(s.training.param_dtype, s.training.grad_dtype, s.training.optimizer, true);
  const double expected = sharded_model_state_bytes(static_cast<double>(plan.parameters), parts, Sharding::zero3, 8);
  CHECK(plan.memory.model_state_bytes == expected);
  CHECK(plan.memory.model_state_bytes == Approx(141.1e9).epsilon(1e-3));
  CHECK(plan.sharded.shards == 8);
  CHECK(plan.sharded.replicas == 8);
  CHECK(plan.optimizer.parameters == (plan.parameters + 7) / 8);
  // The shard group defaults to a node.
  const Scenario by_default =
      load_scenario(src("scenarios/llama3.1-70b-64xh100-ib.yaml"), {{"parallelism.sharding", "hybrid_shard"}});
  CHECK(by_default.parallelism.shard_group == 8);
}

TEST_CASE("HSDP program: each unit's shard all-reduced over the replica group, on the all_reduce stream") {
  const Scenario s = llama70b({});
  const StepPlan plan = make_step_plan(s);
  const StepProgram p = make_step_program(plan);
  const RankProgram& r = p.classes.front();
  REQUIRE(p.streams == std::vector<std::string>{"compute", "comm", "all_reduce"});
  CHECK(p.dims.shard == 8);
  const auto reduces = calls(r, CollectiveKind::reduce_scatter, GroupKind::shard);
  const auto all_reduces = calls(r, CollectiveKind::all_reduce, GroupKind::replica);
  CHECK(calls(r, CollectiveKind::all_gather, GroupKind::shard).size() == 161);
  REQUIRE(reduces.size() == 81);
  REQUIRE(all_reduces.size() == reduces.size());
  CHECK(calls(r, CollectiveKind::all_gather, GroupKind::data).empty());
  for (size_t i = 0; i < reduces.size(); ++i) {
    const ShardUnit& u = plan.sharded.units[static_cast<size_t>(reduces[i]->unit)];
    CHECK(all_reduces[i]->unit == reduces[i]->unit);
    // The reduce-scatter's output: the unit's gradients / 8, padded to a whole number of elements per rank.
    CHECK(all_reduces[i]->bytes == static_cast<double>((u.parameters + 7) / 8) * 2.0);
    CHECK(all_reduces[i]->inputs_ready == EventRef{EventKind::reduced, reduces[i]->unit});
  }
  int on_stream = 0;
  for (const Instr& in : r.instrs)
    if (in.type == Instr::Type::collective) {
      const CommCall& c = r.comms[static_cast<size_t>(in.comm)];
      CHECK(in.stream == (c.group == GroupKind::replica ? StepProgram::kAllReduce : StepProgram::kComm));
      on_stream += in.stream == StepProgram::kAllReduce;
    }
  CHECK(on_stream == 81);
  // The optimizer waits for the last all-reduce, not the last reduce-scatter.
  const auto opt =
      std::find_if(r.instrs.begin(), r.instrs.end(), [](const Instr& in) { return in.type == Instr::Type::optimizer; });
  const Instr& before = *std::find_if(std::make_reverse_iterator(opt), r.instrs.rend(), [](const Instr& in) {
    return in.type == Instr::Type::wait && in.stream == StepProgram::kCompute;
  });
  CHECK(before.event.kind == EventKind::all_reduced);
}

TEST_CASE("hybrid_shard with one shard group of every GPU is full_shard's program") {
  const Scenario hybrid = llama8b({{"parallelism.sharding", "hybrid_shard"}, {"parallelism.shard_group", "8"}});
  const Scenario full = llama8b({});
  const StepPlan hp = make_step_plan(hybrid), fp = make_step_plan(full);
  const StepProgram h = make_step_program(hp), f = make_step_program(fp);
  REQUIRE(h.streams == f.streams);
  const RankProgram &hr = h.classes.front(), &fr = f.classes.front();
  REQUIRE(hr.instrs.size() == fr.instrs.size());
  for (size_t i = 0; i < hr.instrs.size(); ++i) CHECK(describe(hr.instrs[i], h, hr) == describe(fr.instrs[i], f, fr));
  CHECK(hp.memory.total_bytes() == fp.memory.total_bytes());
}

TEST_CASE("_hybrid_shard_zero2: zero2 inside the group, the same all-reduce across replicas") {
  const Scenario s = llama70b({{"parallelism.sharding", "_hybrid_shard_zero2"}});
  const StepPlan plan = make_step_plan(s);
  CHECK(plan.sharded.sharding == Sharding::zero2);
  const StepProgram p = make_step_program(plan);
  const RankProgram& r = p.classes.front();
  CHECK(calls(r, CollectiveKind::all_gather, GroupKind::shard).size() == 81);  // kept from forward to backward
  CHECK(calls(r, CollectiveKind::all_reduce, GroupKind::replica).size() == 81);
}

TEST_CASE("forward_prefetch: the same gathers, one more block ahead under limit_all_gathers") {
  const StepPlan plain = make_step_plan(llama8b({}));
  const StepPlan early = make_step_plan(llama8b({{"fsdp.forward_prefetch", "true"}}));
  const StepProgram pa = make_step_program(plain), pb = make_step_program(early);
  const auto a = limiter_waits(pa.classes.front());
  const auto b = limiter_waits(pb.classes.front());
  REQUIRE(a.size() == 33);  // the root, then 32 blocks
  REQUIRE(b.size() == 33);
  // Forward gather i (i = 0: the root; blocks 1..32 are units 1..32): block k waits for block k-2 to reshard, with
  // forward_prefetch for block k-3.
  for (int k = 1; k <= 32; ++k) {
    CHECK(a[static_cast<size_t>(k)] == (k > 2 ? k - 2 : -1));
    CHECK(b[static_cast<size_t>(k)] == (k > 3 ? k - 3 : -1));
  }
  // Three blocks gathered at once instead of two.
  CHECK(early.memory.unsharded_bytes > plain.memory.unsharded_bytes);
  // Without the limiter the two issue orders give the same comm stream.
  auto comm_stream = [](const StepPlan& p) {
    const StepProgram prog = make_step_program(p);
    std::vector<std::string> out;
    for (const Instr& in : prog.classes.front().instrs)
      if (in.stream == StepProgram::kComm) out.push_back(describe(in, prog, prog.classes.front()));
    return out;
  };
  CHECK(comm_stream(make_step_plan(llama8b({{"fsdp.limit_all_gathers", "false"}}))) ==
        comm_stream(make_step_plan(llama8b({{"fsdp.limit_all_gathers", "false"}, {"fsdp.forward_prefetch", "true"}}))));
}

TEST_CASE("reshard_after_forward false with zero3: zero2's gathers, zero3's model state, every block held") {
  const StepPlan keep = make_step_plan(llama8b({{"fsdp.reshard_after_forward", "false"}}));
  const StepPlan zero3 = make_step_plan(llama8b({}));
  const StepPlan zero2 = make_step_plan(llama8b({{"parallelism.sharding", "zero2"}}));
  const StepProgram kp = make_step_program(keep), z2 = make_step_program(zero2);
  const RankProgram& k = kp.classes.front();
  CHECK(calls(k, CollectiveKind::all_gather, GroupKind::data).size() ==
        calls(z2.classes.front(), CollectiveKind::all_gather, GroupKind::data).size());
  CHECK(limiter_waits(k) == std::vector<int>(33, -1));  // nothing is freed in the forward: the limiter never waits
  CHECK(keep.memory.model_state_bytes == zero3.memory.model_state_bytes);
  double blocks = 0, root = 0;
  for (const ShardUnit& u : keep.sharded.units) (u.name.empty() ? root : blocks) += static_cast<double>(u.parameters);
  CHECK(keep.memory.unsharded_bytes >= (blocks + root) * 2.0);
}

TEST_CASE("wrapping units: wrap_blocks groups blocks, wrap names a submodule of each block") {
  const StepPlan two = make_step_plan(llama8b({{"fsdp.wrap_blocks", "2"}}));
  const StepPlan one = make_step_plan(llama8b({}));
  CHECK(one.sharded.units.size() == 33);
  REQUIRE(two.sharded.units.size() == 17);
  CHECK(two.sharded.units[1].name == "layers.0");
  CHECK(two.sharded.units[2].name == "layers.2");
  CHECK(two.sharded.units[1].parameters == one.sharded.units[1].parameters + one.sharded.units[2].parameters);
  const StepPlan mlp = make_step_plan(llama8b({{"fsdp.wrap", "mlp"}}));
  REQUIRE(mlp.sharded.units.size() == 33);
  CHECK(mlp.sharded.units[1].name == "layers.0.mlp");
  CHECK(mlp.sharded.units[1].parameters == 3LL * 4096 * 14336);
  CHECK(mlp.sharded.units[0].parameters > one.sharded.units[0].parameters);  // attention and norms are the root's
  CHECK(fsdp_wrapped_unit_of("layers.11.self_attn.q_proj", 4, "") == "layers.8");
  CHECK(fsdp_wrapped_unit_of("layers.11.self_attn.q_proj", 1, "self_attn") == "layers.11.self_attn");
  CHECK(fsdp_wrapped_unit_of("layers.11.input_layernorm", 1, "self_attn").empty());
  CHECK(fsdp_wrapped_unit_of("embed_tokens", 2, "").empty());
}

TEST_CASE("advice for an HSDP step that does not fit: larger shard groups, re-evaluated, and how to select each") {
  const Scenario s = llama70b({{"training.activation_checkpointing", "full"}});
  const Evaluate evaluate = [](const Scenario& t, const StepPlan& p) { return estimate(t, p).result; };
  const StepResult r = evaluate(s, make_step_plan(s));
  REQUIRE_FALSE(r.fits);
  const std::string text = advise(s, r, evaluate).at(0);
  INFO(text);
  // 8-GPU groups hold 141.1 GB of model state, 16 hold 70.6 GB, 32 hold 35.3 GB; 64 is zero3, listed as such.
  CHECK(std::regex_search(text, std::regex("hybrid_shard over 16 GPUs: [0-9.]+ GB per GPU, (fits|does not fit)")));
  CHECK(std::regex_search(text, std::regex("hybrid_shard over 32 GPUs: [0-9.]+ GB per GPU, fits, step")));
  CHECK(text.find("hybrid_shard over 64 GPUs") == std::string::npos);
  CHECK(std::regex_search(text, std::regex("zero3: [0-9.]+ GB per GPU, fits, step")));
  // Selecting a strategy over all GPUs means dropping the shard group, which only hybrid sharding takes.
  CHECK(std::regex_search(text, std::regex("Fastest that fits: (zero[123] \\(set parallelism.sharding: zero[123], "
                                           "without parallelism.shard_group\\)|hybrid_shard over [0-9]+ GPUs "
                                           "\\(set parallelism.shard_group: [0-9]+\\))")));
}
