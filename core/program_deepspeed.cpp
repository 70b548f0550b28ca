// DeepSpeed's ZeRO stage 1 and 2 step (zero1 / zero2 with a zero_optimization block), as DeepSpeedZeroOptimizer
// issues it (deepspeed/runtime/zero/stage_1_and_2.py and runtime/utils.py, microsoft/DeepSpeed at 38327e0; the
// line numbers below are that commit's):
// - Gradients go into buckets of reduce_bucket_size elements (core/plan.cpp, deepspeed_buckets). A bucket is
//   flushed when the hook of a gradient that does not fit it fires (:942-944), the last one in the epilogue after
//   the backward (:764-766). Stage 1 without overlap_comm registers no hooks (:527) and reduces every bucket after
//   the backward (reduce_gradients, :719-723).
// - Each flush is one all-reduce of the bucket over the data group: with reduce_scatter (the default) and
//   use_multi_rank_bucket_allreduce (the default), average_tensor gathers every rank's slices of the bucket and
//   all-reduces them (allreduce_and_scatter -> allreduce_bucket -> dist.all_reduce, :1127-1140, :1023-1049,
//   :1490-1512); without reduce_scatter it all-reduces the bucket (gradient_reduction_w_predivide, :982-1009).
// - overlap_comm: the all-reduce runs on the reduction stream, which waits for the compute stream, and the compute
//   stream waits for what the reduction stream had queued before it (the previous bucket: double buffering,
//   :1052-1056); after the backward the device is synchronized (:774-776). Without it the all-reduce runs on the
//   compute stream: the backward waits for each bucket.
// - Stage 2 reduces on every micro-step (partition_gradients, :1424-1426), stage 1 only on the last.
// - The optimizer updates the rank's partition; then the updated 16-bit weights are gathered with one
//   all_gather_into_tensor of the flat group (step(), :1930; all_gather_dp_groups, utils.py:954-968: where torch
//   has all_gather_into_tensor, allgather_bucket_size is not used).
#include "program_builder.hpp"

namespace dpsim::program_detail {

namespace {

// The backward position after which each bucket is flushed (the op that made the next bucket's first gradient);
// -1: after the whole backward (the last bucket, or every bucket when no hooks are registered).
std::vector<int> flush_positions(const StepPlan& plan, bool hooks) {
  std::vector<int> at(plan.buckets.size(), -1);
  if (!hooks) return at;
  std::vector<int> position(plan.ops.size(), -1);
  for (size_t k = 0; k < plan.backward_order.size(); ++k)
    position[static_cast<size_t>(backward_op(plan, k))] = static_cast<int>(k);
  for (size_t b = 0; b + 1 < plan.buckets.size(); ++b) {
    const std::vector<int>& next = plan.buckets[b + 1].grads;
    if (next.empty()) throw RuntimeError(fmt::format("plan: DeepSpeed bucket {} holds no gradient", b + 1));
    at[b] = position.at(static_cast<size_t>(plan.grads.at(static_cast<size_t>(next.front())).op));
  }
  return at;
}

// One bucket's flush: its all-reduce on the reduction stream after the compute that filled it. `event` indexes the
// bucket's events in this step (micro-step x buckets + bucket); `previous` the bucket flushed before it in this
// micro-step (-1: none). `overlap`: overlap_comm (and not predict --no-overlap).
void flush(Builder& bld, const StepPlan& plan, int b, int event, int previous, bool overlap, bool marks) {
  bld.record(kCompute, {EventKind::bucket_ready, event});
  if (overlap && previous >= 0) bld.wait(kCompute, {EventKind::bucket_done, previous});
  bld.wait(kComm, {EventKind::bucket_ready, event});
  if (marks) bld.mark(kComm, Mark::bucket_start, b);
  bld.call(kComm, {.kind = CollectiveKind::all_reduce,
                   .group = GroupKind::data,
                   .bytes = static_cast<double>(plan.buckets[static_cast<size_t>(b)].bytes),
                   .bucket = b,
                   .inputs_ready = {EventKind::bucket_ready, event}});
  if (marks) bld.mark(kComm, Mark::bucket_end, b);
  bld.record(kComm, {EventKind::bucket_done, event});
  if (!overlap) bld.wait(kCompute, {EventKind::bucket_done, event});  // on the compute stream itself
}

// The partition's update, then one all-gather of every rank's updated 16-bit weights.
void step_and_gather(Builder& bld, const StepPlan& plan) {
  bld.mark(kCompute, Mark::optimizer_begin, 0);
  bld.push({.type = Instr::Type::optimizer, .stream = kCompute});
  bld.record(kCompute, {EventKind::optimizer_done, 0});
  bld.wait(kComm, {EventKind::optimizer_done, 0});
  const int index =
      bld.call(kComm, {.kind = CollectiveKind::all_gather,
                       .group = GroupKind::data,
                       .bytes = static_cast<double>(plan.gradient_bytes) * plan.sharded.param_per_grad_bytes,
                       .inputs_ready = {EventKind::optimizer_done, 0}});
  bld.record(kComm, {EventKind::gathered, index});
  bld.wait(kCompute, {EventKind::gathered, index});
  bld.mark(kCompute, Mark::optimizer_end, 0);
}

}  // namespace

StepProgram deepspeed_program(const StepPlan& plan, const ProgramOptions& options) {
  StepProgram program;
  program.streams = {"compute", "comm"};  // comm: DeepSpeed's reduction_stream (:431)
  program.dims = program_dims(plan);
  program.micro_steps = micro_steps(plan, options);
  const bool stage2 = plan.sharded.sharding == Sharding::zero2;
  const bool hooks = stage2 || plan.sharded.overlap_comm;
  const bool overlap = plan.sharded.overlap_comm && options.overlap;
  const std::vector<int> flush_at = flush_positions(plan, hooks);
  const int nbuckets = static_cast<int>(plan.buckets.size());
  const int nops = static_cast<int>(plan.ops.size());

  Builder bld = every_rank(plan);
  bld.mark(kCompute, Mark::step_begin, 0);
  for (int micro = 0; micro < program.micro_steps; ++micro) {
    const bool last = micro == program.micro_steps - 1;
    const bool reduces = stage2 || last;
    int flushed = 0;
    auto flush_next = [&] {
      const int event = micro * nbuckets + flushed;
      flush(bld, plan, flushed, event, flushed > 0 ? event - 1 : -1, overlap, last);
      ++flushed;
    };
    bld.mark(kCompute, Mark::forward_begin, micro);
    for (int o = 0; o < nops; ++o)
      compute_op(bld, plan, {.type = Instr::Type::forward, .stream = kCompute, .op = o, .micro = micro});
    bld.mark(kCompute, Mark::forward_end, micro);
    for (size_t pos = 0; pos < plan.backward_order.size(); ++pos) {
      compute_op(bld, plan,
                 {.type = Instr::Type::backward,
                  .stream = kCompute,
                  .op = backward_op(plan, pos),
                  .micro = micro,
                  .sync = reduces});
      while (reduces && flushed < nbuckets && flush_at[static_cast<size_t>(flushed)] == static_cast<int>(pos))
        flush_next();
    }
    bld.mark(kCompute, Mark::backward_end, micro);
    if (!reduces) continue;
    while (flushed < nbuckets) flush_next();
    // overlap_comm: the epilogue synchronizes the device before the partition's gradients are used (:774-776).
    if (overlap && nbuckets > 0) bld.wait(kCompute, {EventKind::bucket_done, micro * nbuckets + nbuckets - 1});
  }
  step_and_gather(bld, plan);
  program.classes.push_back(std::move(bld.rank));
  return program;
}

}  // namespace dpsim::program_detail
