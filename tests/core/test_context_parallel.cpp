// Context parallelism (parallelism.context) as users rely on it: each GPU of a context group of c computes 1/c of
// every op, its attention 1/c of the causal work against the whole sequence's keys; the activations it keeps are 1/c;
// the ring's sends around each attention op are Transformer Engine's (c - 1 in the forward, c in the backward, the
// middle ones with the key/value gradients too), each beside one attention step; the gradients are reduced over
// data x context GPUs; and the model's FLOPs, what MFU counts, do not change.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "../source_dir.hpp"
#include "dpsim/estimate.hpp"
#include "dpsim/load.hpp"
#include "dpsim/overlap.hpp"
#include "dpsim/plan.hpp"
#include "dpsim/program.hpp"
#include "dpsim/sweep_spec.hpp"

using namespace dpsim;

namespace {

// Llama 3.1 8B on 2 nodes of 8 H100, tensor 4 with sequence parallelism, a 32k sequence.
Scenario cp_scenario(int context, const std::vector<Override>& more = {}) {
  std::vector<Override> o{{"training.sequence_length", "32768"},
                          {"training.attention", "flash"},
                          {"parallelism.tensor", "4"},
                          {"parallelism.sequence_parallel", "true"},
                          {"parallelism.context", std::to_string(context)},
                          {"cluster.topology", "h100-ib-cluster"},
                          {"cluster.nodes", "2"},
                          {"cluster.gpus_per_node", "8"}};
  o.insert(o.end(), more.begin(), more.end());
  return load_scenario(std::string(DPSIM_SOURCE_DIR) + "/scenarios/llama3.1-8b-8xh100.yaml", o);
}

const PlanOp& first_attention(const StepPlan& plan) {
  for (const PlanOp& op : plan.ops)
    if (op.kind == OpKind::attention) return op;
  FAIL("no attention op");
  return plan.ops.front();
}

double sum(const StepPlan& plan, OpKind kind) {
  double f = 0;
  for (const PlanOp& op : plan.ops)
    if (op.kind == kind) f += op.forward_flops;
  return f;
}

}  // namespace

TEST_CASE("context parallelism: each GPU computes 1/c of every op; the model's FLOPs and parameters do not change") {
  const StepPlan one = make_step_plan(cp_scenario(1));
  const StepPlan four = make_step_plan(cp_scenario(4));
  CHECK(four.dims.context == 4);
  CHECK(four.dims.data == one.dims.data / 4);
  CHECK(sum(four, OpKind::matmul) == Approx(sum(one, OpKind::matmul) / 4));
  // Attention: 8k queries against 32k keys, causal: a quarter of the whole sequence's causal work
  CHECK(sum(four, OpKind::attention) == Approx(sum(one, OpKind::attention) / 4));
  const PlanOp& a = first_attention(four);
  REQUIRE(a.gemms.size() == 2);
  CHECK(a.gemms[0].m == 8192);   // this GPU's queries
  CHECK(a.gemms[0].n == 32768);  // every key of the sample
  CHECK(four.model_flops_per_sample == Approx(one.model_flops_per_sample));
  CHECK(four.model_parameters == one.model_parameters);
  CHECK(four.parameters == one.parameters);  // the weights are replicated over the context group
  // What one ring step sends: this GPU's keys and values, its 1/4 of the tokens and 1/4 of the 8 key/value heads
  CHECK(a.context_kv_bytes == Approx(8192.0 * 2 * (8 / 4) * 128 * 2));
  CHECK(first_attention(one).context_kv_bytes == 0);
}

TEST_CASE("context parallelism keeps 1/c of the activations: 128k tokens that do not fit on 4 GPUs fit on 32") {
  const auto at = [](int c, const char* recompute) {
    return make_step_plan(cp_scenario(c, {{"training.sequence_length", "131072"},
                                          {"training.activation_checkpointing", recompute},
                                          {"cluster.nodes", "4"}}))
        .memory.activation_bytes;
  };
  for (const char* recompute : {"none", "full"}) {
    CAPTURE(recompute);
    CHECK(at(8, recompute) == Approx(at(1, recompute) / 8).epsilon(1e-9));
  }
  const Scenario s = cp_scenario(1, {{"training.sequence_length", "131072"}, {"cluster.nodes", "4"}});
  CHECK_FALSE(estimate(s, make_step_plan(s)).result.fits);
  const Scenario c8 = cp_scenario(8, {{"training.sequence_length", "131072"}, {"cluster.nodes", "4"}});
  CHECK(estimate(c8, make_step_plan(c8)).result.fits);
}

TEST_CASE("context parallelism: Transformer Engine's ring sends around each attention op, beside its steps") {
  for (int c : {2, 4}) {
    CAPTURE(c);
    const StepPlan plan = make_step_plan(cp_scenario(c));
    const StepProgram program = make_step_program(plan);
    REQUIRE(program.classes.size() == 1);
    const double kv = first_attention(plan).context_kv_bytes;
    std::vector<double> forward, backward;
    int first_op = -1;
    for (const CommCall& call : program.classes.front().comms) {
      if (call.group != GroupKind::context) continue;
      CHECK(call.kind == CollectiveKind::send);
      CHECK(call.tp_overlap == TpOverlap::async_nccl);
      CHECK(call.overlap_share == Approx(1.0 / c));
      CHECK(plan.ops.at(static_cast<size_t>(call.overlap_op)).kind == OpKind::attention);
      if (first_op < 0) first_op = call.overlap_op;
      if (call.overlap_op != first_op) continue;  // the first layer's attention: its calls in the micro-step
      (call.overlap_backward ? backward : forward).push_back(call.bytes);
    }
    CHECK(forward == std::vector<double>(static_cast<size_t>(c - 1), kv));
    std::vector<double> want(static_cast<size_t>(c), 2 * kv);
    want.front() = kv;  // the first step sends the keys and values only
    want.back() = kv;   // the last the key/value gradients only
    CHECK(backward == want);
  }
}

TEST_CASE("context parallelism: the gradients are reduced over data x context GPUs") {
  const StepPlan plan = make_step_plan(cp_scenario(2, {{"parallelism.sharding", "zero1"}}));
  CHECK(plan.dims.data == 2);
  CHECK(group_size(GroupKind::data, plan.dims) == 4);
  CHECK(plan.sharded.shards == 4);  // Megatron's distributed optimizer shards over the data-parallel group with cp
  const Scenario s = cp_scenario(2);
  const StepResult r = estimate(s, make_step_plan(s)).result;
  CHECK(r.context_parallel == 2);
  CHECK(r.data_parallel == 2);
  CHECK(r.allreduce_bytes_sent_per_gpu == Approx(2.0 * 3 / 4 * static_cast<double>(r.gradient_bytes)));
}

TEST_CASE("context parallelism: a ring slower than the attention is exposed, one faster costs the slowdown only") {
  const NcclModel nccl = cp_scenario(2).nccl;
  const double s = std::max(1.0, nccl.overlap_slowdown);
  const StepPlan plan = make_step_plan(cp_scenario(2));
  const StepProgram program = make_step_program(plan);
  CommCall call;
  for (const CommCall& c : program.classes.front().comms)
    if (c.group == GroupKind::context && !c.overlap_backward) call = c;
  REQUIRE(call.overlap_op >= 0);
  OpSeconds op_s;
  op_s.forward.assign(plan.ops.size(), 0.0);
  op_s.backward.assign(plan.ops.size(), 0.0);
  op_s.forward[static_cast<size_t>(call.overlap_op)] = 10e-3;              // 5 ms per step of 2
  CHECK(blocking_call_s(call, 8e-3, op_s, 4, 132, nccl) == Approx(3e-3));  // 8 ms of sends beside 5 ms of attention
  CHECK(blocking_call_s(call, 1e-3, op_s, 4, 132, nccl) == Approx(1e-3 * (1 - 1 / s)));
}

TEST_CASE("context parallelism: the estimate and the simulator agree, and the exchange shows in the breakdown") {
  const Scenario s = cp_scenario(4, {{"training.gradient_accumulation", "2"}});
  const StepResult e = estimate(s, make_step_plan(s)).result;
  CHECK(e.context_comm_s > 0);
  CHECK(e.context_comm_s < 0.05 * e.step_time_s);  // GQA's 8 key/value heads: the attention hides most of the ring
  CHECK(e.step_time_s ==
        Approx(e.forward_s + e.backward_s + e.optimizer_s + e.tensor_comm_s + e.context_comm_s + e.exposed_comm_s)
            .epsilon(1e-6));
}
