#pragma once
// What the step program's builders share (core/program.cpp: DDP and zero1; core/program_fsdp.cpp: zero2/zero3;
// core/program_deepspeed.cpp: DeepSpeed's stages 1 and 2).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

#include "dpsim/error.hpp"
#include "dpsim/program.hpp"

namespace dpsim::program_detail {

// The streams every builder lays instructions on.
inline constexpr int kCompute = StepProgram::kCompute, kComm = StepProgram::kComm;

// Builds one rank class's instruction list; each helper appends one instruction.
struct Builder {
  RankProgram rank;
  std::map<std::pair<CollectiveKind, GroupKind>, int> calls_issued;  // per (kind, group): the calls so far
  void push(Instr i) { rank.instrs.push_back(i); }
  void mark(int stream, Mark m, int index) {
    push({.type = Instr::Type::mark, .stream = stream, .mark = m, .mark_index = index});
  }
  void record(int stream, EventRef e) { push({.type = Instr::Type::record, .stream = stream, .event = e}); }
  void wait(int stream, EventRef e) { push({.type = Instr::Type::wait, .stream = stream, .event = e}); }
  // A collective on `stream`; its per-(kind, group) index counts the calls of that kind issued so far.
  int call(int stream, CommCall c) {
    c.index = calls_issued[{c.kind, c.group}]++;
    const int id = static_cast<int>(rank.comms.size());
    rank.comms.push_back(c);
    push({.type = Instr::Type::collective, .stream = stream, .comm = id});
    return c.index;
  }
};

// How a linear layer's tensor-parallel call runs beside its GEMMs (overlap.hpp), by parallelism.tp_comm_overlap:
// - userbuffers, Transformer Engine's defaults (base.py `methods`): the all-gather before a GEMM (qkv/fc1 forward,
//   proj/fc2 input gradient) by ring exchange; the reduce-scatter after the forward GEMM (proj/fc2) pipelined; the
//   re-gather of qkv/fc1's saved input beside their input-gradient GEMM ("qkv_dgrad", "fc1_dgrad") and their input
//   gradient's reduce-scatter beside the weight-gradient GEMM ("qkv_wgrad", "fc1_wgrad") in bulk.
// - backward, Megatron-Core without Transformer Engine's overlap (layers.py
//   LinearWithGradAccumulationAndAsyncCommunication.backward, async_op=True): a column-parallel linear's re-gather
//   beside its input-gradient GEMM and its input gradient's all-reduce or reduce-scatter beside its weight gradient.
// Anything else (the forward's, the embedding's, the loss's) blocks.
inline TpOverlap tp_overlap_of(const StepPlan& plan, const PlanOp& op, const TensorCall& c) {
  if (plan.tp_comm_overlap == TpCommOverlap::none || op.kind != OpKind::matmul || op.gemms.empty())
    return TpOverlap::none;
  const bool column_backward = c.backward && (c.regather || (!c.before && c.kind != CollectiveKind::all_gather));
  if (plan.tp_comm_overlap == TpCommOverlap::backward) return column_backward ? TpOverlap::async_nccl : TpOverlap::none;
  if (column_backward) return TpOverlap::bulk;  // userbuffers needs sequence parallelism: no all-reduce here
  if (c.kind == CollectiveKind::all_gather && c.before) return TpOverlap::ring_exchange;
  if (c.kind == CollectiveKind::reduce_scatter && !c.before) return TpOverlap::pipeline;
  return TpOverlap::none;
}

// Context parallelism's ring round an attention op, as Transformer Engine runs it (AttnFuncWithCPAndKVP2P,
// transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py at d0067d0): the forward's c steps
// each attend to one chunk of keys and values while the next arrives, c - 1 exchanges of this GPU's keys and values
// with its ring neighbours (:1698-1717); the backward's c steps pass the keys and values on and the key/value
// gradients back, the first step only the keys and values, the last only the gradients, the others both
// (:2459-2497). Each exchange is an NCCL send/recv on another stream beside one step's attention (1/c of the op's
// forward or backward); what it leaves exposed blocks the compute (blocking_call_s).
inline void context_ring(Builder& bld, const StepPlan& plan, const PlanOp& op, const Instr& in, bool in_backward) {
  const int c = plan.dims.context;
  if (c <= 1 || op.context_kv_bytes <= 0) return;
  const int steps = in_backward ? c : c - 1;
  for (int i = 0; i < steps; ++i) {
    const bool both = in_backward && i > 0 && i < c - 1;
    bld.call(in.stream, {.kind = CollectiveKind::send,
                         .group = GroupKind::context,
                         .bytes = op.context_kv_bytes * (both ? 2 : 1),
                         .inputs_ready = {},
                         .backward = in.type == Instr::Type::backward,
                         .tp_overlap = TpOverlap::async_nccl,
                         .overlap_op = in.op,
                         .overlap_backward = in_backward,
                         .overlap_share = 1.0 / c});
  }
}

// An op's forward or backward on the compute stream with the tensor-parallel collectives around it, on the compute
// stream too: they block the compute, as Megatron-LM's operators f and g do, for what tp_comm_overlap leaves exposed;
// and context parallelism's ring beside an attention op (context_ring). With full recomputation the op's forward (and
// so its forward collectives) runs again before its backward.
inline void compute_op(Builder& bld, const StepPlan& plan, const Instr& in) {
  const PlanOp& op = plan.ops.at(static_cast<size_t>(in.op));
  const bool backward = in.type == Instr::Type::backward;
  auto calls = [&](bool in_backward, bool before) {
    for (const TensorCall& c : op.tensor_calls)
      if (c.backward == in_backward && c.before == before) {
        const TpOverlap overlap = tp_overlap_of(plan, op, c);
        bld.call(in.stream, {.kind = c.kind,
                             .group = GroupKind::tensor,
                             .bytes = c.bytes,
                             .inputs_ready = {},
                             .backward = backward,
                             .tp_overlap = overlap,
                             .overlap_op = overlap == TpOverlap::none ? -1 : in.op,
                             .overlap_backward = in_backward});
      }
  };
  if (backward && op.recompute_forward) {
    calls(false, true);
    context_ring(bld, plan, op, in, false);
    calls(false, false);
  }
  calls(backward, true);
  context_ring(bld, plan, op, in, backward);
  bld.push(in);
  calls(backward, false);
}

// The program's process-group degrees: the plan's, with HSDP's shard group where it has replicas.
inline ParallelDims program_dims(const StepPlan& plan) {
  if (plan.dims.world() != plan.world_size)
    throw RuntimeError(fmt::format("plan: data {} x tensor {} x context {} x pipeline {} GPUs is not its world of {}",
                                   plan.dims.data, plan.dims.tensor, plan.dims.context, plan.dims.pipeline,
                                   plan.world_size));
  ParallelDims d = plan.dims;
  d.shard = plan.sharded.replicas > 1 ? plan.sharded.shards : 0;
  return d;
}

// Data parallelism's one rank class: every rank runs the same instructions.
inline Builder every_rank(const StepPlan& plan) {
  Builder bld;
  bld.rank.rank_class = "every rank";
  bld.rank.ranks = plan.world_size;
  return bld;
}

inline int micro_steps(const StepPlan& plan, const ProgramOptions& options) {
  return static_cast<int>(
      std::max<int64_t>(1, options.micro_steps > 0 ? options.micro_steps : plan.gradient_accumulation));
}

inline int backward_op(const StepPlan& plan, size_t pos) {
  const int o = plan.backward_order[pos];
  if (o < 0 || o >= static_cast<int>(plan.ops.size()))
    throw RuntimeError(fmt::format("plan backward_order names op {}, out of range", o));
  return o;
}

// One DDP bucket on the comm stream: wait for its gradients (and, without overlap, the whole backward), all-reduce
// (zero1: reduce-scatter) over the data group, signal done (program.cpp).
void bucket_allreduce(Builder& bld, const StepPlan& plan, int bucket, bool wait_backward);
// zero1 after the sharded update: the updated weights of each bucket of `stage` (-1: every bucket) all-gathered.
void gather_updated_weights(Builder& bld, const StepPlan& plan, int stage);

// Pipeline stages: one rank class per stage running its schedule's slots (program_pipeline.cpp).
StepProgram pipeline_program(const StepPlan& plan, const ProgramOptions& options);

// zero2/zero3: FSDP's step (program_fsdp.cpp).
StepProgram fsdp_program(const StepPlan& plan, const ProgramOptions& options);

// zero1/zero2 with DeepSpeed's zero_optimization: DeepSpeedZeroOptimizer's step (program_deepspeed.cpp).
StepProgram deepspeed_program(const StepPlan& plan, const ProgramOptions& options);

}  // namespace dpsim::program_detail
