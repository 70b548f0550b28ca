// Sharded data parallelism: ZeRO's memory per GPU (the paper's Figure 1), FSDP's units and its step program
// (what is gathered and reduced, in which order), and the traffic each stage moves.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include "../source_dir.hpp"
#include "dpsim/analytic.hpp"
#include "dpsim/estimate.hpp"
#include "dpsim/load.hpp"
#include "dpsim/program.hpp"
#include "dpsim/sharding.hpp"
#include "dpsim/sweep_spec.hpp"

using namespace dpsim;

namespace {

std::string src(const std::string& rel) { return std::string(DPSIM_SOURCE_DIR) + "/" + rel; }

Scenario llama8b(const std::string& sharding, std::vector<Override> more = {}) {
  more.push_back({"parallelism.sharding", sharding});
  return load_scenario(src("scenarios/llama3.1-8b-8xh100.yaml"), more);
}

// Bytes each rank moves over the step's collectives (nccl-tests' definitions: S x the kind's bus factor).
double traffic_per_gpu(const StepProgram& p) {
  double bytes = 0;
  for (const CommCall& c : p.classes.front().comms) bytes += bytes_moved_per_rank(c.kind, p.dims.world(), c.bytes);
  return bytes;
}

int count(const RankProgram& r, CollectiveKind kind) {
  return static_cast<int>(
      std::count_if(r.comms.begin(), r.comms.end(), [&](const CommCall& c) { return c.kind == kind; }));
}

}  // namespace

TEST_CASE("ZeRO's Figure 1: 7.5B parameters over 64 GPUs with mixed-precision Adam") {
  // Rajbhandari et al. 2019, Figure 1: baseline 120 GB, Pos 31.4 GB, Pos+g 16.6 GB, Pos+g+p 1.9 GB (K = 12).
  const ModelStateParts parts = model_state_parts(Dtype::fp16, Dtype::fp16, Optimizer::adamw, true);
  CHECK(parts.weights == 2);
  CHECK(parts.grads == 2);
  CHECK(parts.optimizer == 12);
  const double psi = 7.5e9;
  CHECK(sharded_model_state_bytes(psi, parts, Sharding::none, 64) / 1e9 == Approx(120.0).epsilon(0));
  CHECK(std::abs(sharded_model_state_bytes(psi, parts, Sharding::zero1, 64) / 1e9 - 31.4) < 0.05);
  CHECK(std::abs(sharded_model_state_bytes(psi, parts, Sharding::zero2, 64) / 1e9 - 16.6) < 0.05);
  CHECK(std::abs(sharded_model_state_bytes(psi, parts, Sharding::zero3, 64) / 1e9 - 1.9) < 0.05);
}

TEST_CASE("Llama 3.1 8B on 8 GPUs: model state per GPU for none / zero1 / zero2 / zero3") {
  // 128.5 / 44.2 / 30.1 / 16.06 GB (issue 14, from 16, 4 + 12/8, 2 + 14/8 and 16/8 bytes per parameter).
  const std::vector<std::pair<std::string, double>> expected{
      {"none", 128.5}, {"zero1", 44.2}, {"shard_grad_op", 30.1}, {"full_shard", 16.06}};
  for (const auto& [name, gb] : expected) {
    const StepPlan plan = make_step_plan(llama8b(name));
    INFO(name << ": " << plan.memory.model_state_bytes / 1e9 << " GB");
    CHECK(std::abs(plan.memory.model_state_bytes / 1e9 - gb) < (gb < 20 ? 0.005 : 0.05));
  }
}

TEST_CASE("FSDP units: a transformer block per unit, the rest in the root") {
  CHECK(fsdp_unit_of("layers.3.attn.qkv") == "layers.3");
  CHECK(fsdp_unit_of("h.11.mlp.fc") == "h.11");
  CHECK(fsdp_unit_of("encoder.layer.0.attention") == "encoder.layer.0");
  CHECK(fsdp_unit_of("embed_tokens").empty());
  CHECK(fsdp_unit_of("lm_head").empty());
  const StepPlan plan = make_step_plan(llama8b("zero3"));
  REQUIRE(plan.sharded.units.size() == 33);  // the root, then 32 decoder layers
  CHECK(plan.sharded.units.front().name.empty());
  CHECK(plan.sharded.units[1].name == "layers.0");
  int64_t params = 0;
  for (const ShardUnit& u : plan.sharded.units) params += u.parameters;
  CHECK(params == plan.parameters);
  CHECK(plan.buckets.empty());  // FSDP reduces per unit, not in DDP buckets
  CHECK(plan.optimizer.parameters == (plan.parameters + 7) / 8);
}

TEST_CASE("zero3 program: the root gathered once, each block twice, every unit reduce-scattered once") {
  const StepPlan plan = make_step_plan(llama8b("zero3"));
  const StepProgram p = make_step_program(plan);
  const RankProgram& r = p.classes.front();
  const int blocks = static_cast<int>(plan.sharded.units.size()) - 1;
  CHECK(count(r, CollectiveKind::all_gather) == 1 + 2 * blocks);
  CHECK(count(r, CollectiveKind::reduce_scatter) == blocks + 1);
  CHECK(count(r, CollectiveKind::all_reduce) == 0);
  // Backward with backward_pre: the next block's gather goes out before the current block's reduce-scatter.
  std::vector<std::string> order;
  for (const CommCall& c : r.comms)
    order.push_back(fmt::format("{}:{}", c.kind == CollectiveKind::all_gather ? "AG" : "RS", c.unit));
  const std::vector<std::string> backward_start(order.begin() + 1 + blocks, order.begin() + 1 + blocks + 5);
  CHECK(backward_start == std::vector<std::string>{"AG:32", "AG:31", "RS:32", "AG:30", "RS:31"});
  CHECK(order.back() == "RS:0");  // the root's gradients are ready last (the embedding)
}

TEST_CASE("fsdp.no_sync false: every micro-step gathers and reduce-scatters (Composer's accumulation)") {
  const auto program_of = [](const std::string& sharding, const std::string& no_sync) {
    return make_step_program(
        make_step_plan(llama8b(sharding, {{"training.gradient_accumulation", "3"}, {"fsdp.no_sync", no_sync}})));
  };
  const int units = static_cast<int>(make_step_plan(llama8b("zero3")).sharded.units.size());
  const int blocks = units - 1;
  for (const std::string sharding : {"zero2", "zero3"}) {
    INFO(sharding);
    const RankProgram kept = program_of(sharding, "true").classes.front();
    const RankProgram each = program_of(sharding, "false").classes.front();
    // Under no_sync() only the last micro-step reduces; without it each of the 3 does.
    CHECK(count(kept, CollectiveKind::reduce_scatter) == units);
    CHECK(count(each, CollectiveKind::reduce_scatter) == 3 * units);
    // zero3 gathers the blocks in every micro-step either way (twice each); the root and zero2's weights are gathered
    // again only when each backward reshards them (no no_sync()).
    const int per_step = sharding == "zero3" ? 1 + 2 * blocks : units;
    CHECK(count(each, CollectiveKind::all_gather) == 3 * per_step);
    CHECK(count(kept, CollectiveKind::all_gather) < count(each, CollectiveKind::all_gather));
  }
}

TEST_CASE("zero3 without backward prefetch gathers each block only after the previous reduce-scatter") {
  const StepPlan plan = make_step_plan(llama8b("zero3", {{"fsdp.backward_prefetch", "none"}}));
  const StepProgram p = make_step_program(plan);
  const RankProgram& r = p.classes.front();
  const int blocks = static_cast<int>(plan.sharded.units.size()) - 1;
  std::vector<std::string> order;
  for (const CommCall& c : r.comms)
    order.push_back(fmt::format("{}:{}", c.kind == CollectiveKind::all_gather ? "AG" : "RS", c.unit));
  const std::vector<std::string> backward_start(order.begin() + 1 + blocks, order.begin() + 1 + blocks + 4);
  CHECK(backward_start == std::vector<std::string>{"AG:32", "RS:32", "AG:31", "RS:31"});
}

TEST_CASE("traffic per GPU: zero1 and zero2 move DDP's bytes, zero3 1.5 times (every unit resharded)") {
  const double ddp = traffic_per_gpu(make_step_program(make_step_plan(llama8b("none"))));
  const double zero1 = traffic_per_gpu(make_step_program(make_step_plan(llama8b("zero1"))));
  const double zero2 = traffic_per_gpu(make_step_program(make_step_plan(llama8b("zero2"))));
  const double zero3 =
      traffic_per_gpu(make_step_program(make_step_plan(llama8b("zero3", {{"fsdp.wrap_root_ops", "true"}}))));
  CHECK(std::abs(zero1 / ddp - 1) < 0.01);
  CHECK(std::abs(zero2 / ddp - 1) < 0.01);
  CHECK(std::abs(zero3 / ddp - 1.5) < 0.01);
  // FSDP's default keeps the root (embedding, final norm, head: 1.05B of Llama 3.1 8B's 8.03B parameters)
  // gathered from the forward to the backward, so it is gathered once: (3 x 8.03 - 1.05) / (2 x 8.03) = 1.43.
  const StepPlan plan = make_step_plan(llama8b("zero3"));
  const double root = static_cast<double>(plan.sharded.units.front().parameters);
  const double psi = static_cast<double>(plan.parameters);
  const double zero3_root_kept = traffic_per_gpu(make_step_program(plan));
  CHECK(zero3_root_kept / ddp == Approx((3 * psi - root) / (2 * psi)).epsilon(1e-9));
}

TEST_CASE("reduce_dtype fp32 doubles the reduce-scatter bytes") {
  const StepPlan bf16 = make_step_plan(llama8b("zero3"));
  const StepPlan fp32 = make_step_plan(llama8b("zero3", {{"fsdp.reduce_dtype", "fp32"}}));
  CHECK(fp32.sharded.units[1].reduce_bytes == 2 * bf16.sharded.units[1].reduce_bytes);
  CHECK(fp32.sharded.units[1].gather_bytes == bf16.sharded.units[1].gather_bytes);
}

TEST_CASE("the estimate of a sharded step follows its program: exposed gathers, a sharded optimizer") {
  const Scenario ddp_s = llama8b("none");
  const Scenario z3_s = llama8b("zero3");
  const Estimate ddp = estimate(ddp_s, make_step_plan(ddp_s));
  const Estimate z3 = estimate(z3_s, make_step_plan(z3_s));
  CHECK(z3.result.optimizer_s == Approx(ddp.result.optimizer_s / 8).epsilon(1e-6));
  CHECK(z3.result.exposed_comm_s > 0);
  CHECK(z3.result.step_time_s == Approx(z3.compute_s + z3.result.exposed_comm_s));
  CHECK(z3.result.model_state_bytes_per_gpu < ddp.result.model_state_bytes_per_gpu / 7);
  CHECK(z3.result.unsharded_bytes_per_gpu > 0);
  REQUIRE(z3.result.comm.size() == 32 * 3 + 2);
  CHECK(z3.result.comm.front().kind == "all_gather");
  CHECK(z3.result.comm.back().kind == "reduce_scatter");
}

// ---- DeepSpeed stage 1/2 (zero_optimization) ----------------------------------------------------------------

namespace {
Scenario deepspeed_zero2(std::vector<Override> more = {}) {
  return load_scenario(src("scenarios/llama3.1-8b-deepspeed-zero2-8xh100.yaml"), more);
}
}  // namespace

TEST_CASE("DeepSpeed's buckets: a tensor that does not fit flushes the open bucket; a larger one is alone") {
  // stage_1_and_2.py:942: flush when elements + numel > reduce_bucket_size.
  CHECK(deepspeed_buckets({3, 3, 3, 3}, 6) == std::vector<std::vector<int>>{{0, 1}, {2, 3}});
  CHECK(deepspeed_buckets({3, 3, 3, 3}, 5) == std::vector<std::vector<int>>{{0}, {1}, {2}, {3}});
  CHECK(deepspeed_buckets({2, 10, 2, 2}, 5) == std::vector<std::vector<int>>{{0}, {1}, {2, 3}});
  CHECK(deepspeed_buckets({4, 4}, 0) == std::vector<std::vector<int>>{{0}, {1}});
  CHECK(deepspeed_buckets({}, 5).empty());
}

TEST_CASE("DeepSpeed's defaults: config.py's values, 17 buckets of 5e8 elements for Llama 3.1 8B, one buffer") {
  const Scenario bare = load_scenario(src("tests/data/deepspeed-defaults.yaml"));
  REQUIRE(bare.zero_optimization);
  const ZeroOptimization& z = *bare.zero_optimization;
  CHECK(z.reduce_bucket_size == 500000000);  // config.py:109
  CHECK(z.allgather_bucket_size == 500000000);
  CHECK_FALSE(z.overlap_comm);  // config.py:351-353: None -> stage == 3
  CHECK(z.reduce_scatter);
  CHECK(z.use_multi_rank_bucket_allreduce);

  const StepPlan plan = make_step_plan(bare);
  CHECK(plan.parameters == 8030261248);
  CHECK(plan.buckets.size() == static_cast<size_t>(std::ceil(8030261248.0 / 5e8)));  // 17
  int64_t numel = 0;
  for (const Bucket& b : plan.buckets) {
    int64_t in = 0;
    for (int g : b.grads) in += plan.grads[static_cast<size_t>(g)].numel;
    CHECK((in <= 500000000 || b.grads.size() == 1));
    numel += in;
  }
  CHECK(numel == plan.parameters);
  CHECK(plan.memory.ddp_buffer_bytes == 1e9);  // one bf16 buffer of 5e8 elements (stage_1_and_2.py:2048-2053)
  CHECK(make_step_plan(deepspeed_zero2({{"zero_optimization.overlap_comm", "true"}})).memory.ddp_buffer_bytes == 2e9);
  CHECK(plan.optimizer.parameters == static_cast<int64_t>(std::ceil(8030261248.0 / 8)));  // the 1/8 partition

  // What DeepSpeed's defaults do: each bucket all-reduced over the 8 GPUs on the compute stream, then one all-gather
  // of the bf16 weights: 1.5x DDP's traffic.
  const StepProgram p = make_step_program(plan);
  const auto& comms = p.classes.front().comms;
  REQUIRE(comms.size() == plan.buckets.size() + 1);
  for (size_t i = 0; i + 1 < comms.size(); ++i) CHECK(comms[i].kind == CollectiveKind::all_reduce);
  CHECK(comms.back().kind == CollectiveKind::all_gather);
  CHECK(comms.back().bytes == static_cast<double>(plan.gradient_bytes));
  const double ddp = 2.0 * 7 / 8 * static_cast<double>(plan.gradient_bytes);
  CHECK(std::abs(traffic_per_gpu(p) / ddp - 1.5) < 1e-9);
  const Estimate e = estimate(bare, plan);
  CHECK(std::abs(e.result.exposed_comm_s - e.result.comm_busy_s) < 1e-9 * e.result.step_time_s);
  // The same step as the shipped scenario, which spells every default out.
  CHECK(estimate(deepspeed_zero2(), make_step_plan(deepspeed_zero2())).result.step_time_s == e.result.step_time_s);
}

TEST_CASE("DeepSpeed stage 1 without overlap_comm reduces after the backward, in parameter order") {
  const StepPlan plan =
      make_step_plan(deepspeed_zero2({{"parallelism.sharding", "zero1"}, {"zero_optimization.stage", "1"}}));
  REQUIRE_FALSE(plan.buckets.empty());
  // The first bucket holds the first parameters defined (the embedding); stage 2's hooks start from the head.
  CHECK(plan.grads[static_cast<size_t>(plan.buckets.front().grads.front())].name == plan.grads.back().name);
  const StepProgram p = make_step_program(plan);
  bool backward_done = false;
  for (const Instr& in : p.classes.front().instrs) {
    if (in.type == Instr::Type::mark && in.mark == Mark::backward_end) backward_done = true;
    if (in.type == Instr::Type::collective) CHECK(backward_done);
  }
}
