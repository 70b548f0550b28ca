// The plan walker: one training step of a StepPlan (its step program) through any Executor.
#include <fmt/format.h>
#include <algorithm>

#include <map>
#include <optional>
#include <stdexcept>

#include "dpsim/backend/executor.hpp"
#include "dpsim/error.hpp"
#include "dpsim/groups.hpp"
#include "dpsim/program.hpp"

namespace dpsim::backend {

const char* to_string(Stream stream) {
  switch (stream) {
    case Stream::compute: return "compute";
    case Stream::comm: return "comm";
    case Stream::all_reduce: return "all_reduce";
  }
  return "?";
}

const char* to_string(GemmRole role) {
  switch (role) {
    case GemmRole::forward: return "fwd";
    case GemmRole::backward_input: return "bwd-dX";
    case GemmRole::backward_weight: return "bwd-dW";
  }
  return "?";
}

const char* to_string(MemoryRole role) {
  switch (role) {
    case MemoryRole::forward: return "fwd";
    case MemoryRole::backward: return "bwd";
    case MemoryRole::grad_fill: return "grad-fill";
    case MemoryRole::scatter_add: return "scatter-add";
    case MemoryRole::grad_divide: return "grad/=world";
    case MemoryRole::grad_to_bucket: return "grad->bucket";
    case MemoryRole::bucket_to_grad: return "bucket->grad";
  }
  return "?";
}

void Executor::collective(Stream, const CommCall& call) {
  if (call.kind != CollectiveKind::all_reduce || call.group != GroupKind::data || call.bucket < 0)
    throw RuntimeError(fmt::format("the GPU backend runs DDP bucket all-reduces only, not {} over the {} group",
                                   to_string(call.kind), to_string(call.group)));
  allreduce_bucket(call.bucket);
}

const char* to_string(StageWork work) {
  switch (work) {
    case StageWork::forward: return "forward";
    case StageWork::backward: return "backward";
    case StageWork::optimizer: return "optimizer";
    case StageWork::tensor_comm: return "tensor-comm";
    case StageWork::p2p: return "p2p";
    case StageWork::neighbour_wait: return "neighbour-wait";
    case StageWork::own_comm_wait: return "own-comm-wait";
  }
  return "?";
}

void Executor::p2p_batch(Stream, const P2PBatch& batch, int number) {
  throw RuntimeError(
      fmt::format("this executor runs no pipeline transfers (batch {} of {} operations)", number, batch.ops.size()));
}

void Executor::stage_work(StageWork) {}

int rank_stage(const StepPlan& plan, int rank) {
  return plan.pipeline.stages > 1 ? coords_of(rank, plan.dims).pipeline : 0;
}

namespace {

// [gradient] -> the pipeline stage of the FSDP unit that holds it (each virtual stage's module is a unit of its own).
std::vector<int> fsdp_grad_stages(const StepPlan& plan) {
  std::vector<int> stage_of(plan.grads.size(), -1);
  for (const ShardUnit& unit : plan.sharded.units)
    for (int o : unit.ops)
      for (int g : plan.ops.at(static_cast<size_t>(o)).grads) stage_of.at(static_cast<size_t>(g)) = unit.stage;
  return stage_of;
}

}  // namespace

StepLayout make_layout(const StepPlan& plan, int element_bytes, bool gradient_as_bucket_view, int stage) {
  if (element_bytes <= 0) throw RuntimeError("make_layout: element size must be > 0");
  StepLayout layout;
  layout.element_bytes = element_bytes;
  // FSDP's gradients are views of its flat parameter's gradient: nothing is copied into buckets.
  const bool fsdp =
      !plan.sharded.deepspeed && (plan.sharded.sharding == Sharding::zero2 || plan.sharded.sharding == Sharding::zero3);
  // DeepSpeed's contiguous_gradients (its default) keeps each gradient in its bucket buffer (stage_1_and_2.py:958-964).
  layout.bucket_view = gradient_as_bucket_view || fsdp || plan.sharded.deepspeed;
  layout.grads.resize(plan.grads.size());
  layout.gemm_grad.resize(plan.ops.size());
  for (size_t o = 0; o < plan.ops.size(); ++o) layout.gemm_grad[o].assign(plan.ops[o].gemms.size(), -1);

  // GEMM <-> gradient: a weight gradient dW [k, n] of a non-batched GEMM with k*n == numel.
  for (size_t o = 0; o < plan.ops.size(); ++o) {
    const PlanOp& op = plan.ops[o];
    for (int g : op.grads) {
      if (g < 0 || g >= static_cast<int>(plan.grads.size()))
        throw RuntimeError("plan op '" + op.name + "' names gradient " + std::to_string(g) + ", out of range");
      if (op.kind == OpKind::embedding) continue;  // written by the scatter-add
      for (size_t j = 0; j < op.gemms.size(); ++j) {
        const GemmShape& s = op.gemms[j];
        if (layout.gemm_grad[o][j] < 0 && s.batch == 1 && s.k * s.n == plan.grads[g].numel) {
          layout.gemm_grad[o][j] = g;
          layout.grads[g].gemm = static_cast<int>(j);
          break;
        }
      }
    }
  }

  // Buckets: contiguous in bucket order; gradients in each bucket's ready order.
  int64_t flat = 0;
  std::vector<bool> placed(plan.grads.size(), false);
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    layout.bucket_offset.push_back(flat);
    int64_t within = 0;
    const bool held = stage < 0 || plan.buckets[b].stage == stage;
    for (int g : plan.buckets[b].grads) {
      if (g < 0 || g >= static_cast<int>(plan.grads.size()) || placed[g])
        throw RuntimeError("plan bucket " + std::to_string(b) + " names gradient " + std::to_string(g) +
                           " out of range or twice");
      placed[g] = true;
      layout.grads[g].held = held;
      if (!held) continue;
      layout.grads[g].flat_offset = flat + within;
      layout.grads[g].bucket_offset = within;
      within += plan.grads[g].numel;
    }
    layout.bucket_numel.push_back(within);
    flat += within;
  }
  if (fsdp) {  // no DDP buckets: one flat buffer in gradient-ready order (a stage's: its own units' gradients)
    const std::vector<int> stage_of = fsdp_grad_stages(plan);
    for (size_t g = 0; g < placed.size(); ++g) {
      placed[g] = true;
      layout.grads[g].held = stage < 0 || stage_of[g] == stage;
      if (!layout.grads[g].held) continue;
      layout.grads[g].flat_offset = flat;
      layout.grads[g].bucket_offset = flat;
      flat += plan.grads[g].numel;
    }
  }
  for (size_t g = 0; g < placed.size(); ++g)
    if (!placed[g]) throw RuntimeError("plan gradient '" + plan.grads[g].name + "' is in no bucket");
  layout.total_numel = flat;
  return layout;
}

namespace {

GemmCall make_gemm(int op, int j, const GemmShape& s, GemmRole role) {
  GemmCall c;
  c.op = op;
  c.gemm = j;
  c.role = role;
  c.batch = s.batch;
  switch (role) {  // forward shape: X [m,k] W [k,n] -> Y [m,n]
    case GemmRole::forward:
      c.m = s.m;
      c.n = s.n;
      c.k = s.k;
      break;
    case GemmRole::backward_input:
      c.m = s.m;
      c.n = s.k;
      c.k = s.n;
      break;  // dX = dY W^T
    case GemmRole::backward_weight:
      c.m = s.k;
      c.n = s.n;
      c.k = s.m;
      break;  // dW = X^T dY
  }
  return c;
}

void launch_gemm(Executor& ex, const GemmCall& c) {
  if (c.batch > 1)
    ex.batched_gemm(c);
  else
    ex.gemm(c);
}

// The backend's side of the step program: each program instruction becomes the kernels, copies and events
// that PyTorch DDP launches for it on the GPU.
class KernelAdaptor final : public StepExecutor {
 public:
  KernelAdaptor(const StepPlan& plan, const StepProgram& program, const RankProgram& rank,
                std::vector<P2PBatch> batches, const StepLayout& layout, Executor& ex)
      : plan_(plan), program_(program), rank_(rank), layout_(layout), ex_(ex) {
    for (P2PBatch& b : batches)
      if (b.ops.front().type != P2POp::Type::all_reduce) batch_at_.emplace(b.first_instr, std::move(b));
  }

  void forward(const Instr& in) override {
    work(StageWork::forward);
    const PlanOp& op = plan_.ops[static_cast<size_t>(in.op)];
    if (op.kind == OpKind::embedding || op.forward_bytes > 0)
      ex_.memory_kernel({.op = in.op, .role = MemoryRole::forward, .bytes = op.forward_bytes});
    for (size_t j = 0; j < op.gemms.size(); ++j)
      launch_gemm(ex_, make_gemm(in.op, static_cast<int>(j), op.gemms[j], GemmRole::forward));
  }

  void backward(const Instr& in) override {
    work(StageWork::backward);
    const int o = in.op;
    const PlanOp& op = plan_.ops[static_cast<size_t>(o)];
    const bool accumulate = in.micro > 0;
    // DDP's division by the world size (the plan's grad_copy_bytes): without bucket views, while copying each
    // gradient into its bucket; with them, in the bucket, on the synced micro-step (no_sync() steps run no DDP
    // hook; their share of the plan's bytes stays in the elementwise kernel).
    const bool copies = op.grad_copy_bytes > 0 && !layout_.bucket_view;
    const bool divides = op.grad_copy_bytes > 0 && layout_.bucket_view && in.sync;
    const double elementwise = std::max(0.0, op.backward_bytes - (copies || divides ? op.grad_copy_bytes : 0.0));
    if (elementwise > 0) ex_.memory_kernel({.op = o, .role = MemoryRole::backward, .bytes = elementwise});
    // A matmul's backward runs the GEMMs the plan wants (core/trainable.cpp: dX, dW); attention's both or none.
    const bool attention = op.kind == OpKind::attention;
    for (size_t j = 0; j < op.gemms.size(); ++j) {
      const GemmShape& s = op.gemms[j];
      if (op.input_grad) launch_gemm(ex_, make_gemm(o, static_cast<int>(j), s, GemmRole::backward_input));
      if (!op.weight_grad && !(attention && op.input_grad)) continue;
      GemmCall dw = make_gemm(o, static_cast<int>(j), s, GemmRole::backward_weight);
      dw.grad = layout_.gemm_grad[static_cast<size_t>(o)][j];
      dw.accumulate = accumulate && dw.grad >= 0;
      launch_gemm(ex_, dw);
    }
    for (int g : op.grads) {
      if (layout_.grads[static_cast<size_t>(g)].gemm >= 0) continue;
      const bool embedding = op.kind == OpKind::embedding;
      const auto bytes = static_cast<double>(plan_.grads[static_cast<size_t>(g)].bytes);
      // A linear's bias: dY summed over the tokens (the plan's bias_grad_bytes, read once).
      ex_.memory_kernel({.op = o,
                         .role = embedding ? MemoryRole::scatter_add : MemoryRole::grad_fill,
                         .bytes = embedding ? bytes : std::max(2.0 * bytes, op.bias_grad_bytes),
                         .grad = g,
                         .bucket = plan_.grads[static_cast<size_t>(g)].bucket,
                         .accumulate = accumulate});
    }
    if (!copies && !divides) return;
    for (int g : op.grads)
      ex_.memory_kernel({.op = o,
                         .role = copies ? MemoryRole::grad_to_bucket : MemoryRole::grad_divide,
                         .bytes = 2.0 * static_cast<double>(plan_.grads[static_cast<size_t>(g)].bytes),
                         .grad = g,
                         .bucket = plan_.grads[static_cast<size_t>(g)].bucket,
                         .divisor = group_size(GroupKind::data)});
  }

  // A group of one rank: nothing to communicate, no kernel on the comm stream (its events and marks stay). A
  // pipeline send is its batch's.
  void collective(const Instr& in, const CommCall& call) override {
    if (in.batch >= 0) return transfer(in);
    if (group_size(call.group) < 2) return;
    if (stream(in) == Stream::compute) work(between_stages(call) ? StageWork::p2p : StageWork::tensor_comm);
    ex_.collective(stream(in), call);
  }

  // What a send delivers is the receiving stage's batch's: no event crosses GPUs.
  void record(const Instr& in) override {
    if (!crosses_classes(in.event.kind)) ex_.record_event(stream(in), event(in));
  }
  void wait(const Instr& in) override {
    if (crosses_classes(in.event.kind)) return transfer(in);  // a receive
    if (stream(in) == Stream::compute) work(StageWork::own_comm_wait);
    ex_.stream_wait(stream(in), event(in));
  }

  void unflatten(const Instr&) override {
    if (layout_.bucket_view) return;
    for (size_t b = 0; b < plan_.buckets.size(); ++b)
      if (rank_.stage < 0 || plan_.buckets[b].stage == rank_.stage) {
        work(StageWork::optimizer);
        ex_.memory_kernel({.role = MemoryRole::bucket_to_grad,
                           .bytes = 2.0 * static_cast<double>(plan_.buckets[b].bytes),
                           .bucket = static_cast<int>(b)});
      }
  }

  void optimizer(const Instr&) override {
    work(StageWork::optimizer);
    ex_.optimizer_step();
  }
  void mark(const Instr& in) override { ex_.mark(stream(in), in.mark, in.mark_index); }

 private:
  static Stream stream(const Instr& in) {
    if (in.stream == StepProgram::kCompute) return Stream::compute;
    if (in.stream == StepProgram::kComm) return Stream::comm;
    if (in.stream == StepProgram::kAllReduce) return Stream::all_reduce;
    throw RuntimeError(
        fmt::format("the backend has a compute, a comm and an all_reduce stream, not stream {}", in.stream));
  }
  static EventRef event(const Instr& in) {
    if (in.event.kind == EventKind::backward_done)
      throw RuntimeError(
          fmt::format("the backend has no {} event (it always overlaps communication)", to_string(in.event.kind)));
    return {in.event.kind, in.event.index};
  }
  int group_size(GroupKind kind) const { return static_cast<int>(group_of(0, kind, program_.dims).ranks.size()); }
  // A batch is issued where its first instruction stands; its other instructions are in it. One that sends blocks
  // until its peers receive (p2p); one that only receives waits for a neighbour.
  void transfer(const Instr& in) {
    const auto it = batch_at_.find(static_cast<int>(&in - rank_.instrs.data()));
    if (it == batch_at_.end()) return;
    const auto& ops = it->second.ops;
    const bool sends =
        std::any_of(ops.begin(), ops.end(), [](const P2POp& op) { return op.type == P2POp::Type::send; });
    if (stream(in) == Stream::compute) work(sends ? StageWork::p2p : StageWork::neighbour_wait);
    ex_.p2p_batch(stream(in), it->second, in.batch);
  }
  // A pipeline stage's compute stream: where its work changes, a new span (Executor::stage_work).
  void work(StageWork w) {
    if (rank_.stage < 0 || (working_ && *working_ == w)) return;
    working_ = w;
    ex_.stage_work(w);
  }
  const StepPlan& plan_;
  const StepProgram& program_;
  const RankProgram& rank_;
  std::map<int, P2PBatch> batch_at_;  // first instruction -> the batch of sends and receives issued there
  const StepLayout& layout_;
  Executor& ex_;
  std::optional<StageWork> working_;  // the compute stream's current span (pipeline stages)
};

}  // namespace

PreparedStep prepare_step(const StepPlan& plan, int64_t gradient_accumulation) {
  ProgramOptions po;
  po.micro_steps = std::max<int64_t>(1, gradient_accumulation);
  PreparedStep step{make_step_program(plan, po), {}};
  step.batches = p2p_batches(step.program);
  if (const auto deadlock = p2p_deadlock(step.program, step.batches)) throw RuntimeError(*deadlock);
  return step;
}

void walk_step(const StepPlan& plan, const StepLayout& layout, const WalkOptions& options, const PreparedStep& step,
               Executor& ex) {
  const StepProgram& program = step.program;
  const auto c = static_cast<size_t>(std::max(0, options.stage));
  if (c >= program.classes.size())
    throw RuntimeError(
        fmt::format("walk_step: stage {} of a program of {} rank classes", options.stage, program.classes.size()));
  KernelAdaptor adaptor(plan, program, program.classes[c], step.batches[c], layout, ex);
  walk_program(program, program.classes[c], adaptor);
}

void walk_step(const StepPlan& plan, const StepLayout& layout, const WalkOptions& options, Executor& ex) {
  walk_step(plan, layout, options, prepare_step(plan, options.gradient_accumulation), ex);
}

}  // namespace dpsim::backend
