// Pipeline parallelism end to end in the core: the plan's stages, the step program's classes and the closed form's
// timing of the shipped 3D scenario (scenarios/llama3.1-70b-tp8-pp2-64xh100.yaml) and its schedule variants.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../source_dir.hpp"
#include "dpsim/analytic.hpp"
#include "dpsim/estimate.hpp"
#include "dpsim/groups.hpp"
#include "dpsim/load.hpp"
#include "dpsim/plan.hpp"
#include "dpsim/program.hpp"
#include "dpsim/sweep_spec.hpp"

using namespace dpsim;

namespace {

Scenario three_d(std::vector<Override> more = {}) {
  return load_scenario(std::string(DPSIM_SOURCE_DIR) + "/scenarios/llama3.1-70b-tp8-pp2-64xh100.yaml", more);
}

int count(const RankProgram& r, Instr::Type type, int op) {
  int n = 0;
  for (const Instr& in : r.instrs) n += in.type == type && in.op == op ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("the 3D plan: 40 blocks per stage, the embedding first, the head last, each stage's own buckets") {
  const StepPlan plan = make_step_plan(three_d());
  CHECK(plan.dims.data == 4);
  CHECK(plan.dims.tensor == 8);
  CHECK(plan.dims.pipeline == 2);
  REQUIRE(plan.pipeline.stage.size() == 2);
  std::map<int, std::set<int>> blocks_of_stage;
  for (size_t o = 0; o < plan.ops.size(); ++o) {
    const std::string& name = plan.ops[o].name;
    const int stage = plan.pipeline.stage_of(static_cast<int>(o));
    if (name == "embed_tokens") CHECK(stage == 0);
    if (name == "lm_head" || name == "loss" || name == "norm") CHECK(stage == 1);
    if (name.rfind("layers.", 0) == 0) blocks_of_stage[stage].insert(std::stoi(name.substr(7)));
  }
  CHECK(blocks_of_stage[0].size() == 40);
  CHECK(*blocks_of_stage[0].rbegin() == 39);
  CHECK(*blocks_of_stage[1].begin() == 40);
  // Buckets hold one stage's gradients, stage 0's first; each stage's parameters are its optimizer's (zero1: / 4).
  int last_stage = 0;
  for (const Bucket& b : plan.buckets) {
    for (int g : b.grads) CHECK(plan.pipeline.stage_of(plan.grads[static_cast<size_t>(g)].op) == b.stage);
    CHECK(b.stage >= last_stage);
    last_stage = b.stage;
  }
  int64_t held = 0;
  for (const StageNeed& s : plan.pipeline.stage) {
    held += s.parameters;
    CHECK(s.optimizer.parameters == (s.parameters + 3) / 4);
  }
  CHECK(held == plan.parameters);
  // 1F1B: stage 0 keeps p = 2 micro-batches in flight, the last stage 1 (Narayanan et al. 2021, Section 2.2).
  CHECK(plan.pipeline.stage[0].in_flight == 2);
  CHECK(plan.pipeline.stage[1].in_flight == 1);
  CHECK(three_d({{"parallelism.schedule", "gpipe"}}).training.gradient_accumulation == 16);
  CHECK(make_step_plan(three_d({{"parallelism.schedule", "gpipe"}})).pipeline.stage[0].in_flight == 16);
}

TEST_CASE("the 3D program: a class per stage, every forward and backward once per micro-batch, sends paired") {
  const StepPlan plan = make_step_plan(three_d());
  const StepProgram p = make_step_program(plan);
  REQUIRE(p.classes.size() == 2);
  std::set<std::pair<int, int>> recorded, waited;
  for (size_t c = 0; c < p.classes.size(); ++c) {
    const RankProgram& r = p.classes[c];
    CHECK(r.stage == static_cast<int>(c));
    CHECK(r.ranks == 32);
    for (size_t o = 0; o < plan.ops.size(); ++o) {
      const bool mine = plan.pipeline.stage_of(static_cast<int>(o)) == r.stage;
      CHECK(count(r, Instr::Type::forward, static_cast<int>(o)) == (mine ? 16 : 0));
      CHECK(count(r, Instr::Type::backward, static_cast<int>(o)) == (mine ? 16 : 0));
    }
    int sends = 0;
    for (const CommCall& call : r.comms) sends += call.kind == CollectiveKind::send ? 1 : 0;
    CHECK(sends == 16);  // stage 0 its activations, stage 1 its input gradients
    for (const Instr& in : r.instrs) {
      if (!crosses_classes(in.event.kind)) continue;
      if (in.type == Instr::Type::record) recorded.insert({static_cast<int>(in.event.kind), in.event.index});
      if (in.type == Instr::Type::wait) waited.insert({static_cast<int>(in.event.kind), in.event.index});
    }
  }
  CHECK(recorded == waited);
  CHECK(recorded.size() == 32);
}

TEST_CASE("the 3D step: GPipe's bubble is 1F1B's, interleaving halves it, stage memory follows the schedule") {
  const Estimate one = estimate(three_d(), make_step_plan(three_d()));
  const auto gpipe_s = three_d({{"parallelism.schedule", "gpipe"}});
  const Estimate gpipe = estimate(gpipe_s, make_step_plan(gpipe_s));
  const auto inter_s = three_d({{"parallelism.schedule", "interleaved_1f1b"}, {"parallelism.virtual_stages", "2"}});
  const Estimate inter = estimate(inter_s, make_step_plan(inter_s));
  const StepResult& r = one.result;
  REQUIRE(r.stages.size() == 2);
  // Each stage's compute stream accounts for the whole step.
  for (const StageTiming& t : r.stages)
    CHECK(t.forward_s + t.backward_s + t.optimizer_s + t.tensor_comm_s + t.p2p_s + t.exposed_comm_s + t.bubble_s ==
          Approx(t.end_s).epsilon(1e-9));
  // The bubble: (p - 1) = 1 micro-batch's forward and backward of a stage (1F1B and GPipe alike), within the sends.
  const StageTiming& s0 = r.stages[0];
  const double per_micro = (s0.forward_s + s0.backward_s + s0.tensor_comm_s) / 16;
  CHECK(r.pipeline_bubble_s == Approx(per_micro).epsilon(0.1));
  CHECK(gpipe.result.step_time_s == Approx(r.step_time_s).epsilon(1e-9));
  CHECK(inter.result.pipeline_bubble_s == Approx(r.pipeline_bubble_s / 2).epsilon(0.1));
  CHECK(inter.result.p2p_s > 2.5 * r.p2p_s);  // v = 2: sends at twice the boundaries, more in the warm-up
  CHECK(gpipe.result.memory_need_bytes() > r.memory_need_bytes() + 10e9);
}

// ddp.overlap_grad_reduce false (Megatron-LM's local DDP, megatron/training.py train_step @6985e589): each stage
// reduces its buckets after its last slot, so none of the data-parallel all-reduce hides behind the backward; the
// same key on a plain DDP step puts every bucket after the backward.
TEST_CASE("ddp.overlap_grad_reduce false: the buckets wait for the whole forward-backward, with and without stages") {
  const Scenario over = three_d();
  const Scenario local = three_d({{"ddp.overlap_grad_reduce", "false"}});
  const StepPlan local_plan = make_step_plan(local);
  const StepProgram program = make_step_program(local_plan);
  for (const RankProgram& r : program.classes) {
    size_t last_backward = 0, first_bucket = r.instrs.size();
    for (size_t i = 0; i < r.instrs.size(); ++i) {
      if (r.instrs[i].type == Instr::Type::backward) last_backward = i;
      if (r.instrs[i].type == Instr::Type::collective &&
          r.comms[static_cast<size_t>(r.instrs[i].comm)].group == GroupKind::data)
        first_bucket = std::min(first_bucket, i);
    }
    INFO(r.rank_class);
    CHECK(first_bucket > last_backward);
    CHECK(first_bucket < r.instrs.size());
  }
  const StepResult a = estimate(over, make_step_plan(over)).result;
  const StepResult b = estimate(local, local_plan).result;
  CHECK(b.comm_busy_s == Approx(a.comm_busy_s).epsilon(1e-9));  // the same buckets, the same bytes
  CHECK(b.exposed_comm_s == Approx(b.comm_busy_s).epsilon(1e-6));
  // Stage 0 ends the step: it now also waits for the part of its reduction the last backward used to hide.
  REQUIRE(a.stages.size() == 2);
  CHECK(b.step_time_s == Approx(a.step_time_s + a.stages[0].comm_busy_s - a.stages[0].exposed_comm_s).epsilon(1e-4));
  CHECK(a.stages[0].comm_busy_s - a.stages[0].exposed_comm_s > 0.1);

  const auto ddp = [](const char* overlap) {
    return load_scenario(std::string(DPSIM_SOURCE_DIR) + "/scenarios/llama3.1-8b-8xh100.yaml",
                         {{"ddp.overlap_grad_reduce", overlap}});
  };
  const StepResult d1 = estimate(ddp("true"), make_step_plan(ddp("true"))).result;
  const StepResult d0 = estimate(ddp("false"), make_step_plan(ddp("false"))).result;
  CHECK(d0.exposed_comm_s == Approx(d0.comm_busy_s).epsilon(1e-6));
  CHECK(d0.step_time_s == Approx(d1.no_overlap_step_s).epsilon(1e-6));
  CHECK(d1.exposed_comm_s < 0.5 * d1.comm_busy_s);
}

// A tied word embedding with pipeline stages (Megatron-LM: the last stage holds a copy, language_module.py:279-290 at
// d98e8a6, and the two stages all-reduce its gradient before the optimizer, training.py:376-397 @6985e58938).
TEST_CASE("tied embedding over pipeline stages: the last stage holds a copy, the two ends all-reduce its gradient") {
  const Scenario s = load_scenario(
      std::string(DPSIM_SOURCE_DIR) + "/scenarios/megatron-1.2b-1xv100.yaml",
      {{"cluster.gpus_per_node", "4"}, {"parallelism.pipeline", "4"}, {"training.gradient_accumulation", "8"}});
  const StepPlan plan = make_step_plan(s);
  const int64_t vocab = s.model.transformer->vocab_size, hidden = s.model.transformer->hidden_size;
  CHECK(plan.pipeline.embedding_grad_bytes == static_cast<double>(vocab * hidden * 2));  // fp16 gradients
  CHECK(plan.model_parameters == 1'213'479'936);  // the copy is not the model's: its count is unchanged
  REQUIRE(plan.pipeline.stage.size() == 4);
  int64_t held = 0;
  for (const StageNeed& st : plan.pipeline.stage) held += st.parameters;
  CHECK(held == plan.model_parameters + vocab * hidden);
  const StepProgram program = make_step_program(plan);
  REQUIRE(program.classes.size() == 4);
  for (const RankProgram& r : program.classes) {
    int calls = 0;
    size_t at = 0, last_backward = 0, optimizer = 0;
    for (size_t i = 0; i < r.instrs.size(); ++i) {
      const Instr& in = r.instrs[i];
      if (in.type == Instr::Type::backward) last_backward = i;
      if (in.type == Instr::Type::optimizer) optimizer = i;
      if (in.type == Instr::Type::collective && r.comms[static_cast<size_t>(in.comm)].group == GroupKind::embedding) {
        ++calls;
        at = i;
        CHECK(r.comms[static_cast<size_t>(in.comm)].bytes == plan.pipeline.embedding_grad_bytes);
        CHECK(in.stream == StepProgram::kCompute);
      }
    }
    INFO(r.rank_class);
    CHECK(calls == (r.stage == 0 || r.stage == 3 ? 1 : 0));
    if (calls) CHECK((at > last_backward && at < optimizer));
  }
  const ProcessGroup g = group_of(0, GroupKind::embedding, plan.dims);
  CHECK(g.ranks == std::vector<int>{0, 3});
  CHECK(groups_of(GroupKind::embedding, plan.dims).size() == 1);  // the middle stages are in none
  const StepResult r = estimate(s, plan).result;
  bool timed = false;
  for (const CommTiming& c : r.comm)
    if (c.group == "embedding") timed = c.end_s > c.start_s && c.bytes == plan.pipeline.embedding_grad_bytes;
  CHECK(timed);
  CHECK(make_step_plan(three_d()).pipeline.embedding_grad_bytes == 0);  // Llama 3.1 70B: untied
}

TEST_CASE("the 3D program numbers each (kind, group)'s calls in issue order, and each call costs what call_cost says") {
  const Scenario s = three_d();
  const StepPlan plan = make_step_plan(s);
  const StepProgram p = make_step_program(plan);
  for (const RankProgram& r : p.classes) {
    // validate matches predicted and measured calls by (kind, group, index): 0, 1, 2, ... per pair, in issue order.
    std::map<std::pair<CollectiveKind, GroupKind>, int> next;
    for (const Instr& in : r.instrs) {
      if (in.type != Instr::Type::collective) continue;
      const CommCall& call = r.comms.at(static_cast<size_t>(in.comm));
      CHECK(call.index == next[{call.kind, call.group}]++);
    }
    CHECK(next.size() >= 4);  // tensor all-gathers and reduce-scatters, sends, the data group's zero1 calls
    CallCosts costs(s, p, r);
    for (const CommCall& call : r.comms) {
      CHECK(costs.moves(call) == (group_of(0, call.group, p.dims).ranks.size() > 1));
      const CollectiveCost want = call_cost(s, call, group_fabric(s, p, call.group));
      const CollectiveCost got = costs.cost(call);
      CHECK(got.algorithm == want.algorithm);
      CHECK(got.protocol == want.protocol);
      CHECK(got.time_s == want.time_s);
      CHECK(got.latency_s == want.latency_s);
      CHECK(got.busbw_bytes_per_s == want.busbw_bytes_per_s);
    }
    CommCall other;
    other.group = GroupKind::shard;  // no call of a pipeline stage's is over a shard group
    CHECK_THROWS_WITH(costs.moves(other), Catch::Contains("not a call of this program"));
  }
}

TEST_CASE(
    "full_shard under pipelining: each stage gathers its own units once, reduce-scatters each after the last "
    "micro-batch's backward, and holds its weights and gradients in full") {
  const Scenario s = load_scenario(std::string(DPSIM_SOURCE_DIR) + "/scenarios/llama3.1-70b-fsdp-tp8-pp2-64xh100.yaml");
  const StepPlan plan = make_step_plan(s);
  REQUIRE(plan.sharded.sharding == Sharding::zero3);
  CHECK_FALSE(plan.sharded.reshard_after_forward);
  CHECK(plan.buckets.empty());
  // Units: a stage's blocks and its root (the embedding on stage 0; the final norm, head and loss on stage 1), each
  // unit's ops on its stage.
  std::map<int, int> units_of_stage, roots_of_stage;
  std::map<int, int64_t> parameters_of_stage;
  for (const ShardUnit& u : plan.sharded.units) {
    for (int o : u.ops) CHECK(plan.pipeline.stage_of(o) == u.stage);
    ++units_of_stage[u.stage];
    roots_of_stage[u.stage] += u.name.empty() ? 1 : 0;
    parameters_of_stage[u.stage] += u.parameters;
  }
  CHECK(units_of_stage[0] == 41);
  CHECK(units_of_stage[1] == 41);
  CHECK(roots_of_stage[0] == 1);
  CHECK(roots_of_stage[1] == 1);
  // Memory: the model state over the 4-GPU data group, and the stage's bf16 weights and gradients in full.
  for (int stage = 0; stage < 2; ++stage) {
    const StageNeed& need = plan.pipeline.stage[static_cast<size_t>(stage)];
    CHECK(need.parameters == parameters_of_stage[stage]);
    CHECK(need.memory.unsharded_bytes == Approx(4.0 * static_cast<double>(parameters_of_stage[stage])));
    CHECK(need.memory.model_state_bytes == Approx(16.0 * static_cast<double>(parameters_of_stage[stage]) / 4));
  }
  // fsdp.reduce_dtype fp32: fully_shard accumulates the unsharded gradients between micro-batches in fp32
  // (_fsdp_param.py to_accumulated_grad_if_needed), so each stage holds 2 + 4 bytes per parameter in full, not 2 + 2.
  Scenario fp32_reduce = s;
  fp32_reduce.fsdp.reduce_dtype = Dtype::fp32;
  const StepPlan upcast = make_step_plan(fp32_reduce);
  for (int stage = 0; stage < 2; ++stage)
    CHECK(upcast.pipeline.stage[static_cast<size_t>(stage)].memory.unsharded_bytes ==
          Approx(6.0 * static_cast<double>(parameters_of_stage[stage])));
  const StepProgram p = make_step_program(plan);
  REQUIRE(p.classes.size() == 2);
  for (const RankProgram& r : p.classes) {
    std::map<int, int> gathers, reduces;  // unit -> calls
    for (const CommCall& c : r.comms) {
      if (c.kind == CollectiveKind::all_gather && c.group == GroupKind::data) ++gathers[c.unit];
      if (c.kind == CollectiveKind::reduce_scatter && c.group == GroupKind::data) ++reduces[c.unit];
    }
    CHECK(static_cast<int>(gathers.size()) == units_of_stage[r.stage]);
    CHECK(static_cast<int>(reduces.size()) == units_of_stage[r.stage]);
    for (const auto& [u, n] : gathers) {
      CHECK(n == 1);  // once per step, not per micro-batch
      CHECK(plan.sharded.units[static_cast<size_t>(u)].stage == r.stage);
    }
    for (const auto& [u, n] : reduces) CHECK(n == 1);
    // Each reduce-scatter is issued after the last micro-batch's backward of its unit's first op (the unit's last).
    std::map<int, size_t> last_backward_at;  // op -> instruction index of its last micro-batch's backward
    for (size_t i = 0; i < r.instrs.size(); ++i) {
      const Instr& in = r.instrs[i];
      if (in.type == Instr::Type::backward && in.micro == plan.pipeline.micro_batches - 1) last_backward_at[in.op] = i;
      if (in.type != Instr::Type::collective) continue;
      const CommCall& c = r.comms[static_cast<size_t>(in.comm)];
      if (c.kind != CollectiveKind::reduce_scatter || c.group != GroupKind::data) continue;
      const int first_op = plan.sharded.units[static_cast<size_t>(c.unit)].ops.front();
      REQUIRE(last_backward_at.count(first_op));
    }
  }
  // The step: about zero1's (no weights gathered after the update), the data-parallel calls mostly hidden.
  const StepResult fsdp = estimate(s, plan).result;
  const Scenario zero1_s = three_d({{"parallelism.tensor_impl", "torch"}});  // the same tensor parallelism as `s`
  const StepResult zero1 = estimate(zero1_s, make_step_plan(zero1_s)).result;
  CHECK(fsdp.step_time_s == Approx(zero1.step_time_s).epsilon(0.05));
  CHECK(fsdp.memory_need_bytes() < zero1.memory_need_bytes());
}
