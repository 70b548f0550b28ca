// The plan walker through the dry-run executor: DDP's launch order on a hand-built plan (and a LoRA scenario's).
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>

#include "../source_dir.hpp"
#include "dpsim/backend/executor.hpp"
#include "dpsim/load.hpp"
#include "dpsim/plan.hpp"
#include "sequence_check.hpp"
#include "tiny_plan.hpp"

using namespace dpsim;
using namespace dpsim::backend;

namespace {
std::vector<Launch> dry_run(const StepPlan& plan, const StepLayout& layout) {
  DryRunExecutor dry;
  WalkOptions wo;
  wo.gradient_accumulation = plan.gradient_accumulation;
  walk_step(plan, layout, wo, dry);
  return dry.launches();
}
}  // namespace

TEST_CASE("layout: buckets are contiguous, gradients in ready order, GEMM weights matched by shape") {
  const StepPlan p = test::tiny_plan();
  const StepLayout l = make_layout(p, 2, true);
  CHECK(l.total_numel == 88);
  CHECK(l.bucket_offset == std::vector<int64_t>{0, 18, 48});
  CHECK(l.bucket_numel == std::vector<int64_t>{18, 30, 40});
  CHECK(l.grads[0].flat_offset == 0);
  CHECK(l.grads[1].flat_offset == 18);
  CHECK(l.grads[2].flat_offset == 24);
  CHECK(l.grads[2].bucket_offset == 6);
  CHECK(l.grads[3].flat_offset == 48);
  CHECK(l.grads[0].gemm == 0);     // lin2: k*n = 6*3
  CHECK(l.grads[2].gemm == 0);     // lin1: k*n = 4*6
  CHECK(l.grads[1].gemm == -1);    // norm: memory kernel
  CHECK(l.grads[3].gemm == -1);    // embedding: scatter-add
  CHECK(l.gemm_grad[2][0] == -1);  // attention: no weights
}

TEST_CASE(
    "dry run of one step follows DDP: events in bucket order, grads before events, comm in order, optimizer last") {
  const StepPlan p = test::tiny_plan();
  const StepLayout l = make_layout(p, 2, true);
  const auto seq = dry_run(p, l);
  const auto f = test::check_sequence(p, l, seq);
  CHECK(f.backward_ops == p.backward_order);
  // Bucket b's event follows the backward of the op the plan says completes it.
  REQUIRE(f.ready_after_op.size() == p.buckets.size());
  for (size_t b = 0; b < p.buckets.size(); ++b)
    CHECK(f.ready_after_op[b] == p.backward_order[static_cast<size_t>(p.buckets[b].ready_after_backward_op)]);
  // Backward of a GEMM: dX then dW, dW of lin2 into its gradient, attention as batched GEMMs.
  int batched = 0, dw_into_grad = 0;
  for (const auto& x : seq) {
    if (x.type == Launch::Type::batched_gemm) ++batched;
    if (x.type == Launch::Type::gemm && x.gemm_call.role == GemmRole::backward_weight && x.gemm_call.grad >= 0)
      ++dw_into_grad;
  }
  CHECK(batched == 3);  // forward, dA, dB
  CHECK(dw_into_grad == 2);
  const std::string text = describe_launches(p, seq);
  CHECK(text.find("allreduce    bucket 0") != std::string::npos);
  CHECK(text.find("scatter-add") != std::string::npos);
}

TEST_CASE("gradient accumulation: k-1 no-sync micro-steps, then the synced one; dW accumulates after the first") {
  const StepPlan p = test::tiny_plan(8, 3);
  const StepLayout l = make_layout(p, 2, true);
  const auto seq = dry_run(p, l);
  test::check_sequence(p, l, seq);
  int forwards = 0, allreduces_before_last_forward = 0, accumulating = 0;
  for (const auto& x : seq) {
    if (x.type == Launch::Type::mark && x.mark_kind == Mark::forward_begin) ++forwards;
    if (x.type == Launch::Type::allreduce && forwards < 3) ++allreduces_before_last_forward;
    if (x.type == Launch::Type::gemm && x.gemm_call.accumulate) ++accumulating;
  }
  CHECK(forwards == 3);
  CHECK(allreduces_before_last_forward == 0);
  CHECK(accumulating == 2 * 2);  // two weight GEMMs in micro-steps 1 and 2
}

TEST_CASE("without bucket views: grad->bucket copies before each event, bucket->grad copies before the optimizer") {
  const StepPlan p = test::tiny_plan();
  const StepLayout l = make_layout(p, 2, false);
  const auto seq = dry_run(p, l);
  test::check_sequence(p, l, seq);
  int to_bucket = 0, to_grad = 0;
  size_t last_to_grad = 0, optimizer = 0;
  for (size_t i = 0; i < seq.size(); ++i) {
    if (seq[i].type == Launch::Type::memory && seq[i].memory_call.role == MemoryRole::grad_to_bucket) ++to_bucket;
    if (seq[i].type == Launch::Type::memory && seq[i].memory_call.role == MemoryRole::bucket_to_grad) {
      ++to_grad;
      last_to_grad = i;
    }
    if (seq[i].type == Launch::Type::optimizer) optimizer = i;
  }
  CHECK(to_bucket == 4);
  CHECK(to_grad == 3);
  CHECK(last_to_grad < optimizer);
}

TEST_CASE("a plan whose buckets complete out of order is refused") {
  StepPlan p = test::tiny_plan();
  std::swap(p.buckets[0].ready_after_backward_op, p.buckets[1].ready_after_backward_op);
  const StepLayout l = make_layout(p, 2, true);
  DryRunExecutor dry;
  CHECK_THROWS_WITH(walk_step(p, l, WalkOptions{}, dry), Catch::Contains("strictly in order"));
}

TEST_CASE("a gradient in no bucket is refused") {
  StepPlan p = test::tiny_plan();
  p.buckets[2].grads.clear();
  CHECK_THROWS_WITH(make_layout(p, 2, true), Catch::Contains("embed.weight"));
}

TEST_CASE("one rank: no collective and no comm-stream kernel; the comm stream keeps its events and marks") {
  StepPlan p = test::tiny_plan();
  p.world_size = 1;
  p.dims.data = 1;
  const StepLayout l = make_layout(p, 2, true);
  const auto seq = dry_run(p, l);
  int comm_kernels = 0, comm_events = 0, divides = 0;
  for (const auto& x : seq) {
    if (x.type == Launch::Type::allreduce || x.type == Launch::Type::collective) ++comm_kernels;
    if (x.stream == Stream::comm && (x.type == Launch::Type::record || x.type == Launch::Type::mark)) ++comm_events;
    if (x.type == Launch::Type::memory && x.memory_call.role == MemoryRole::grad_divide) {
      ++divides;
      CHECK(x.memory_call.divisor == 1);
    }
  }
  CHECK(comm_kernels == 0);
  CHECK(comm_events == 3 * static_cast<int>(p.buckets.size()));  // bucket_start, bucket_end, bucket_done
  CHECK(divides == static_cast<int>(p.grads.size()));            // DDP divides by 1 all the same
  // Two ranks: one all-reduce per bucket.
  StepPlan two = test::tiny_plan();
  int allreduces = 0;
  for (const auto& x : dry_run(two, make_layout(two, 2, true)))
    if (x.type == Launch::Type::allreduce) ++allreduces;
  CHECK(allreduces == static_cast<int>(two.buckets.size()));
}

TEST_CASE("gradients are divided by the world size once, in or into the bucket, on the synced micro-step only") {
  StepPlan p = test::tiny_plan(8, 3);
  p.world_size = 4;
  p.dims.data = 4;
  for (const bool view : {true, false}) {
    INFO("gradient_as_bucket_view " << view);
    const StepLayout l = make_layout(p, 2, view);
    const auto seq = dry_run(p, l);
    test::check_sequence(p, l, seq);
    std::map<int, int> divided;  // grad -> divisions on the synced micro-step
    int micro = -1, divisions_before_sync = 0;
    double memory_bytes = 0;
    for (const auto& x : seq) {
      if (x.type == Launch::Type::mark && x.mark_kind == Mark::forward_begin) micro = x.index;
      if (x.type != Launch::Type::memory) continue;
      const MemoryCall& m = x.memory_call;
      if (m.role != MemoryRole::bucket_to_grad && m.op >= 0 && m.role != MemoryRole::forward) memory_bytes += m.bytes;
      const bool division = view ? m.role == MemoryRole::grad_divide : m.role == MemoryRole::grad_to_bucket;
      if (!division) continue;
      CHECK(m.divisor == 4);
      if (micro == 2) ++divided[m.grad];
      if (micro < 2 && view) ++divisions_before_sync;
    }
    CHECK(divisions_before_sync == 0);  // no_sync(): no DDP hook, the bucket accumulates undivided
    for (size_t g = 0; g < p.grads.size(); ++g) CHECK(divided[static_cast<int>(g)] == 1);
    // The backward's memory traffic is the plan's, however it is split (3 micro-steps).
    double plan_bytes = 0;
    for (const PlanOp& op : p.ops) plan_bytes += op.backward_bytes;
    double grad_fill_extra = 0;  // grad_fill / scatter_add are the gradients' own writes, not in backward_bytes
    for (const auto& x : seq)
      if (x.type == Launch::Type::memory &&
          (x.memory_call.role == MemoryRole::grad_fill || x.memory_call.role == MemoryRole::scatter_add))
        grad_fill_extra += x.memory_call.bytes;
    CHECK(memory_bytes - grad_fill_extra == Approx(3 * plan_bytes));
  }
}

TEST_CASE("the bucket->grad copies count as optimizer time: after optimizer_begin, as the simulator counts them") {
  const StepPlan p = test::tiny_plan();
  const auto seq = dry_run(p, make_layout(p, 2, false));
  size_t optimizer_begin = 0, first_copy = 0, last_wait = 0;
  for (size_t i = 0; i < seq.size(); ++i) {
    const auto& x = seq[i];
    if (x.type == Launch::Type::mark && x.mark_kind == Mark::optimizer_begin) optimizer_begin = i;
    if (x.type == Launch::Type::memory && x.memory_call.role == MemoryRole::bucket_to_grad && first_copy == 0)
      first_copy = i;
    if (x.type == Launch::Type::wait && x.stream == Stream::compute) last_wait = i;
  }
  REQUIRE(first_copy > 0);
  CHECK(last_wait < optimizer_begin);
  CHECK(optimizer_begin < first_copy);
}

TEST_CASE("LoRA: the backward launches dW only for the adapters, dX only above the first trainable tensor") {
  const StepPlan p =
      make_step_plan(load_scenario(std::filesystem::path(DPSIM_SOURCE_DIR) / "scenarios/llama3.1-8b-lora-8xl40s.yaml"));
  const StepLayout l = make_layout(p, 2, true);
  int dw = 0, dw_into_grad = 0, dx = 0;
  for (const auto& x : dry_run(p, l)) {
    if (x.type != Launch::Type::gemm) continue;
    if (x.gemm_call.role == GemmRole::backward_weight) {
      ++dw;
      dw_into_grad += x.gemm_call.grad >= 0 ? 1 : 0;
      CHECK(p.ops[static_cast<size_t>(x.gemm_call.op)].name.find(".lora_") != std::string::npos);
    }
    if (x.gemm_call.role == GemmRole::backward_input) ++dx;
  }
  CHECK(dw == 4 * 32 * 2);  // lora_A and lora_B of q, k, v, o in 32 blocks
  CHECK(dw_into_grad == dw);
  // dX: every linear layer but the first block's q, k, v (nothing before them trains) and their adapters' lora_A.
  int linear = 0;
  for (const PlanOp& op : p.ops) linear += op.kind == OpKind::matmul ? 1 : 0;
  CHECK(dx == linear - 6);
}
