// Sharded data parallelism in the simulator: without contention and without the overlap slowdown, the simulated
// step equals the estimate's clock-per-stream walk of the same program, for every strategy; with one unit and no
// prefetch it is the closed form gather + forward + gather + backward + reduce-scatter + optimizer.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "../source_dir.hpp"
#include "dpsim/analytic.hpp"
#include "dpsim/estimate.hpp"
#include "dpsim/load.hpp"
#include "dpsim/sim/simulate.hpp"
#include "dpsim/sweep_spec.hpp"

using namespace dpsim;

namespace {

Scenario llama8b(const std::string& sharding, std::vector<Override> more = {}) {
  more.push_back({"parallelism.sharding", sharding});
  Scenario s = load_scenario(std::filesystem::path(DPSIM_SOURCE_DIR) / "scenarios/llama3.1-8b-8xh100.yaml", more);
  s.nccl.set_overlap_slowdown_everywhere(1);  // the closed form has no slowdown of compute beside collectives
  return s;
}

StepResult predict(const Scenario& s, const StepPlan& plan) {
  SimOptions o;
  o.progress = false;
  return simulate(s, plan, o);
}

}  // namespace

TEST_CASE("sharded steps: the simulator equals the estimate's walk of the same program", "[sim]") {
  for (const char* sharding : {"zero1", "zero2", "zero3"}) {
    for (const char* prefetch : {"backward_pre", "none"}) {
      if (std::string(sharding) == "zero1" && std::string(prefetch) == "none") continue;
      std::vector<Override> knobs;
      if (std::string(sharding) != "zero1") knobs.push_back({"fsdp.backward_prefetch", prefetch});
      const Scenario s = llama8b(sharding, knobs);
      const StepPlan plan = make_step_plan(s);
      const StepResult sim = predict(s, plan);
      const Estimate est = estimate(s, plan);
      INFO(sharding << " backward_prefetch " << prefetch << ": simulated " << sim.step_time_s << " s, estimate "
                    << est.result.step_time_s << " s");
      CHECK(std::abs(sim.step_time_s - est.result.step_time_s) / est.result.step_time_s < 1e-6);
      CHECK(std::abs(sim.exposed_comm_s - est.result.exposed_comm_s) / est.result.step_time_s < 1e-6);
      REQUIRE(sim.comm.size() == est.result.comm.size());
      for (size_t i = 0; i < sim.comm.size(); ++i) {
        CHECK(sim.comm[i].kind == est.result.comm[i].kind);
        CHECK(sim.comm[i].index == est.result.comm[i].index);
        CHECK(std::abs(sim.comm[i].end_s - est.result.comm[i].end_s) < 1e-6 * est.result.step_time_s);
      }
    }
  }
}

TEST_CASE("zero3 with one unit and no prefetch: the closed form", "[sim]") {
  const Scenario s = llama8b("zero3", {{"fsdp.backward_prefetch", "none"}});
  StepPlan plan = make_step_plan(s);
  // Every op in one wrapped unit (not the root): gathered before the forward and again before the backward.
  ShardUnit all{.name = "all"};
  for (size_t o = 0; o < plan.ops.size(); ++o) all.ops.push_back(static_cast<int>(o));
  all.parameters = plan.parameters;
  all.gather_bytes = static_cast<double>(plan.parameters) * dtype_bytes(s.training.param_dtype);
  all.reduce_bytes = static_cast<double>(plan.parameters) * dtype_bytes(s.training.grad_dtype);
  plan.sharded.units = {all};

  const FabricSummary f = summarize_fabric(s.topology);
  const double launch = s.nccl.framework_launch_overhead_s;
  const double gather = collective_cost(CollectiveKind::all_gather, all.gather_bytes, f, s.nccl, s.collective).time_s;
  const double reduce =
      collective_cost(CollectiveKind::reduce_scatter, all.reduce_bytes, f, s.nccl, s.collective).time_s;
  const ComputeModel cm = compute_model(s);
  double fwd = 0, bwd = 0;
  for (const PlanOp& op : plan.ops) {
    fwd += forward_seconds(op, cm);
    bwd += backward_seconds(op, cm);
  }
  const double optimizer = optimizer_seconds(plan.optimizer, cm);
  const double closed = 2 * (launch + gather) + fwd + bwd + launch + reduce + optimizer;
  const StepResult sim = predict(s, plan);
  INFO("simulated " << sim.step_time_s << " s, closed form " << closed << " s");
  CHECK(std::abs(sim.step_time_s - closed) / closed < 1e-6);
  CHECK(std::abs(sim.exposed_comm_s - (2 * (launch + gather) + launch + reduce)) / closed < 1e-6);
}

namespace {

Scenario deepspeed(const std::string& stage, std::vector<Override> more = {}) {
  more.push_back({"parallelism.sharding", "zero" + stage});
  more.push_back({"zero_optimization.stage", stage});
  Scenario s = load_scenario(
      std::filesystem::path(DPSIM_SOURCE_DIR) / "scenarios/llama3.1-8b-deepspeed-zero2-8xh100.yaml", more);
  s.nccl.set_overlap_slowdown_everywhere(1);
  return s;
}

// The step with nothing overlapped: compute, each call (its launch and its cost) and the optimizer, in a row.
struct Serial {
  double compute_s = 0, comm_s = 0;
};
Serial serial_step(const Scenario& s, const StepPlan& plan) {
  const ComputeModel cm = compute_model(s);
  const FabricSummary f = summarize_fabric(s.topology);
  Serial out;
  for (const PlanOp& op : plan.ops) out.compute_s += forward_seconds(op, cm) + backward_seconds(op, cm);
  out.compute_s += optimizer_seconds(plan.optimizer, cm);
  for (const Bucket& b : plan.buckets)
    out.comm_s +=
        s.nccl.framework_launch_overhead_s +
        collective_cost(CollectiveKind::all_reduce, static_cast<double>(b.bytes), f, s.nccl, s.collective).time_s;
  const double weights = static_cast<double>(plan.parameters) * dtype_bytes(s.training.param_dtype);
  out.comm_s += s.nccl.framework_launch_overhead_s +
                collective_cost(CollectiveKind::all_gather, weights, f, s.nccl, s.collective).time_s;
  return out;
}

}  // namespace

TEST_CASE("DeepSpeed stage 1/2 without overlap_comm: every reduction exposed, the closed form", "[sim]") {
  for (const char* stage : {"1", "2"}) {
    const Scenario s = deepspeed(stage, {{"zero_optimization.reduce_bucket_size", "2e8"}});
    const StepPlan plan = make_step_plan(s);
    const Serial closed = serial_step(s, plan);
    const StepResult sim = predict(s, plan);
    const Estimate est = estimate(s, plan);
    INFO("stage " << stage << ": simulated " << sim.step_time_s << " s, closed form "
                  << closed.compute_s + closed.comm_s << " s");
    for (const StepResult& r : {sim, est.result}) {
      CHECK(std::abs(r.step_time_s - (closed.compute_s + closed.comm_s)) / r.step_time_s < 1e-6);
      CHECK(std::abs(r.exposed_comm_s - closed.comm_s) / r.step_time_s < 1e-6);
    }
  }
}

TEST_CASE("DeepSpeed overlap_comm hides reductions behind the backward; the simulator equals the estimate", "[sim]") {
  for (const char* stage : {"1", "2"}) {
    const Scenario off = deepspeed(stage);
    const Scenario on = deepspeed(stage, {{"zero_optimization.overlap_comm", "true"}});
    const StepResult a = predict(off, make_step_plan(off)), b = predict(on, make_step_plan(on));
    const Estimate est = estimate(on, make_step_plan(on));
    INFO("stage " << stage << ": overlap_comm false " << a.step_time_s << " s, true " << b.step_time_s << " s");
    CHECK(std::abs(b.step_time_s - est.result.step_time_s) / b.step_time_s < 1e-6);
    CHECK(b.step_time_s < a.step_time_s);
    CHECK(b.exposed_comm_s < 0.5 * a.exposed_comm_s);
    // Hidden only up to the double buffer: the compute waits for bucket b-1 when bucket b is full, so at least the
    // last bucket's all-reduce and the all-gather after the update stay exposed.
    CHECK(b.exposed_comm_s > 0);
  }
}

TEST_CASE("DeepSpeed: stage 2 reduces on every micro-step, stage 1 on the last only", "[sim]") {
  for (const char* stage : {"1", "2"}) {
    const Scenario s = deepspeed(stage, {{"training.gradient_accumulation", "3"}});
    const StepPlan plan = make_step_plan(s);
    const StepProgram p = make_step_program(plan);
    int all_reduces = 0, all_gathers = 0;
    for (const CommCall& c : p.classes.front().comms) {
      all_reduces += c.kind == CollectiveKind::all_reduce;
      all_gathers += c.kind == CollectiveKind::all_gather;
    }
    const int per_step = static_cast<int>(plan.buckets.size());
    CHECK(all_reduces == (std::string(stage) == "2" ? 3 * per_step : per_step));
    CHECK(all_gathers == 1);
  }
}

TEST_CASE("HSDP on two nodes: the simulator equals the estimate's walk; one shard group of all GPUs is full_shard",
          "[sim]") {
  auto two_nodes = [](std::vector<Override> knobs) {
    knobs.push_back({"cluster.nodes", "2"});
    Scenario s =
        load_scenario(std::filesystem::path(DPSIM_SOURCE_DIR) / "scenarios/llama3.1-8b-1024xh100-ib.yaml", knobs);
    s.nccl.set_overlap_slowdown_everywhere(1);
    return s;
  };
  const Scenario hybrid = two_nodes({{"parallelism.sharding", "hybrid_shard"}});
  REQUIRE(hybrid.parallelism.shard_group == 8);
  const StepPlan plan = make_step_plan(hybrid);
  const StepResult sim = predict(hybrid, plan);
  const Estimate est = estimate(hybrid, plan);
  INFO("hybrid_shard: simulated " << sim.step_time_s << " s, estimate " << est.result.step_time_s << " s");
  CHECK(std::abs(sim.step_time_s - est.result.step_time_s) / est.result.step_time_s < 1e-6);
  REQUIRE(sim.comm.size() == est.result.comm.size());
  int replica = 0;
  for (size_t i = 0; i < sim.comm.size(); ++i) {
    CHECK(sim.comm[i].group == est.result.comm[i].group);
    CHECK(std::abs(sim.comm[i].end_s - est.result.comm[i].end_s) < 1e-6 * est.result.step_time_s);
    if (sim.comm[i].group == "replica") {
      ++replica;
      CHECK(sim.comm[i].stream == "all_reduce");
      CHECK(sim.comm[i].kind == "all_reduce");
    }
  }
  CHECK(replica == static_cast<int>(plan.sharded.units.size()));

  const Scenario whole = two_nodes({{"parallelism.sharding", "hybrid_shard"}, {"parallelism.shard_group", "16"}});
  const Scenario full = two_nodes({{"parallelism.sharding", "full_shard"}});
  const StepResult w = predict(whole, make_step_plan(whole)), f = predict(full, make_step_plan(full));
  CHECK(w.step_time_s == f.step_time_s);
  CHECK(w.exposed_comm_s == f.exposed_comm_s);
  CHECK(w.model_state_bytes_per_gpu == f.model_state_bytes_per_gpu);
  REQUIRE(w.comm.size() == f.comm.size());
  for (size_t i = 0; i < w.comm.size(); ++i) CHECK(w.comm[i].end_s == f.comm[i].end_s);
}

TEST_CASE(
    "HSDP with shard groups across nodes: its all-reduces share the NICs with the gathers, never faster than "
    "the estimate",
    "[sim]") {
  Scenario s = load_scenario(
      std::filesystem::path(DPSIM_SOURCE_DIR) / "scenarios/llama3.1-8b-1024xh100-ib.yaml",
      {{"cluster.nodes", "4"}, {"parallelism.sharding", "hybrid_shard"}, {"parallelism.shard_group", "16"}});
  s.nccl.set_overlap_slowdown_everywhere(1);
  const StepPlan plan = make_step_plan(s);
  REQUIRE(plan.sharded.replicas == 2);
  const StepResult sim = predict(s, plan);
  const Estimate est = estimate(s, plan);
  INFO("simulated " << sim.step_time_s << " s, estimate " << est.result.step_time_s << " s");
  // The estimate has no contention: the simulator's shared links can only delay the calls.
  CHECK(sim.step_time_s >= est.result.step_time_s * (1 - 1e-9));
  REQUIRE(sim.comm.size() == est.result.comm.size());
  for (size_t i = 0; i < sim.comm.size(); ++i) CHECK(sim.comm[i].end_s >= est.result.comm[i].end_s * (1 - 1e-9));
}

TEST_CASE("the compute beside NVLS slows by NVLS's SMs, beside a ring by the measured average", "[sim]") {
  // Llama 3.1 8B DDP on 8 H100: every bucket runs NVLS (16 channels of 132 SMs)
  const Scenario s = load_scenario(std::filesystem::path(DPSIM_SOURCE_DIR) / "scenarios/llama3.1-8b-8xh100.yaml");
  const StepResult nvls = predict(s, make_step_plan(s));
  for (const auto& b : nvls.buckets) REQUIRE(b.algorithm == "nvls");
  // the same step with the NVLS level set to what it is: 132 / 116 everywhere changes nothing
  Scenario same = s;
  same.nccl.set_overlap_slowdown_everywhere(132.0 / 116);
  CHECK(predict(same, make_step_plan(same)).step_time_s == Approx(nvls.step_time_s).epsilon(1e-9));
  // the ring's measured average beside every call: the backward overlapped with the buckets takes longer
  Scenario ring_like = s;
  ring_like.nccl.set_overlap_slowdown_everywhere(s.nccl.overlap_slowdown);
  const StepResult slower = predict(ring_like, make_step_plan(ring_like));
  CHECK(slower.backward_s > nvls.backward_s);
  CHECK(slower.step_time_s > nvls.step_time_s);
}
