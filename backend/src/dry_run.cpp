// The dry-run executor: records every launch, for tests and `dpsim measure --dry-run`.
#include <fmt/format.h>

#include "dpsim/backend/executor.hpp"
#include "dpsim/backend/shard_buffers.hpp"
#include "dpsim/error.hpp"
#include "dpsim/units.hpp"

namespace dpsim::backend {

// Each launch is recorded with the fields its kind uses (designated initializers, in Launch's member order).
void DryRunExecutor::gemm(const GemmCall& call) {
  launches_.push_back({.type = Launch::Type::gemm, .gemm_call = call});
}

void DryRunExecutor::batched_gemm(const GemmCall& call) {
  launches_.push_back({.type = Launch::Type::batched_gemm, .gemm_call = call});
}

void DryRunExecutor::memory_kernel(const MemoryCall& call) {
  launches_.push_back({.type = Launch::Type::memory, .memory_call = call});
}

void DryRunExecutor::record_event(Stream stream, EventRef event) {
  launches_.push_back({.type = Launch::Type::record, .stream = stream, .event = event, .bucket = event.bucket});
}

void DryRunExecutor::stream_wait(Stream waiter, EventRef event) {
  launches_.push_back({.type = Launch::Type::wait, .stream = waiter, .event = event, .bucket = event.bucket});
}

void DryRunExecutor::allreduce_bucket(int bucket) {
  launches_.push_back({.type = Launch::Type::allreduce, .stream = Stream::comm, .bucket = bucket});
}

namespace {

// Where a launch reads and writes: the buffers and offsets of its plan (shard_buffers.hpp).
Launch::Spans spans_of(const CallBuffers& b) {
  return Launch::Spans{.send_buffer = static_cast<int>(b.send.buffer),
                       .recv_buffer = static_cast<int>(b.recv.buffer),
                       .send_offset = b.send.offset,
                       .recv_offset = b.recv.offset,
                       .count = b.count};
}

}  // namespace

void DryRunExecutor::collective(Stream stream, const CommCall& call) {
  if (call.kind == CollectiveKind::all_reduce && call.bucket >= 0) return allreduce_bucket(call.bucket);
  Launch l{.type = Launch::Type::collective, .stream = stream, .bucket = call.bucket, .call = call};
  if (buffers_) l.buffers = spans_of(buffers_->call(call));
  launches_.push_back(l);
}

void DryRunExecutor::p2p_batch(Stream stream, const P2PBatch& batch, int number) {
  for (const P2POp& op : batch.ops) {
    if (op.type == P2POp::Type::all_reduce)
      throw RuntimeError("dry run: the tied embedding's all-reduce is a collective, not a point-to-point batch");
    Launch l{.type = op.type == P2POp::Type::send ? Launch::Type::send : Launch::Type::recv,
             .stream = stream,
             .p2p = op,
             .batch = number};
    if (buffers_) l.buffers = spans_of(buffers_->p2p(op));
    launches_.push_back(l);
  }
}

void DryRunExecutor::optimizer_step() { launches_.push_back({.type = Launch::Type::optimizer}); }

void DryRunExecutor::stage_work(StageWork work) {
  launches_.push_back({.type = Launch::Type::stage_work, .stream = Stream::compute, .work = work});
}

void DryRunExecutor::mark(Stream stream, Mark mark, int index) {
  launches_.push_back({.type = Launch::Type::mark, .stream = stream, .mark_kind = mark, .index = index});
}

namespace {
const char* event_name(EventKind kind) { return to_string(kind); }

std::string op_name(const StepPlan& plan, int op) {
  return op >= 0 && op < static_cast<int>(plan.ops.size()) ? plan.ops[op].name : std::string("-");
}
// What a call that is neither an FSDP unit's nor a DDP bucket's moves: Megatron's tensor-parallel collectives move
// activation-sized tensors (activations, their gradients in the backward, the recomputed forward's there too), a
// stage's send its output activations (forward) or its input's gradient (backward), the tied embedding's
// all-reduce its gradient, zero1's and DeepSpeed's gathers the updated weights.
const char* call_payload(const CommCall& call) {
  if (call.group == GroupKind::embedding) return "embedding-gradient";
  if (call.kind == CollectiveKind::send) return call.backward ? "input-gradient" : "activations";
  if (call.group == GroupKind::tensor) return "activations";
  return "weights";
}
std::string grad_name(const StepPlan& plan, int grad) {
  return grad >= 0 && grad < static_cast<int>(plan.grads.size()) ? plan.grads[grad].name : std::string("scratch");
}
}  // namespace

std::string Launch::describe(const StepPlan& plan) const {
  switch (type) {
    case Type::gemm:
    case Type::batched_gemm: {
      const GemmCall& c = gemm_call;
      std::string s =
          fmt::format("compute  {:<13} {:<7} {} m={} n={} k={}", type == Type::gemm ? "gemm" : "batched_gemm",
                      to_string(c.role), op_name(plan, c.op), c.m, c.n, c.k);
      if (c.batch > 1) s += fmt::format(" batch={}", c.batch);
      s += fmt::format(" ({} FLOP)", format_count(c.flops()));
      if (c.role == GemmRole::backward_weight) s += " -> " + grad_name(plan, c.grad) + (c.accumulate ? " (+=)" : "");
      return s;
    }
    case Type::memory: {
      const MemoryCall& m = memory_call;
      std::string s =
          fmt::format("compute  {:<13} {:<7} {} {}", "memory", to_string(m.role),
                      m.op >= 0 ? op_name(plan, m.op) : fmt::format("bucket {}", m.bucket), format_bytes(m.bytes));
      if (m.grad >= 0) s += " -> " + grad_name(plan, m.grad);
      return s;
    }
    case Type::record:
      return fmt::format("{:<8} record       {}[{}]", to_string(stream), event_name(event.kind), event.bucket);
    case Type::wait:
      return fmt::format("{:<8} wait         {}[{}]", to_string(stream), event_name(event.kind), event.bucket);
    case Type::allreduce: {
      const auto& b = plan.buckets.at(static_cast<size_t>(bucket));
      return fmt::format("comm     allreduce    bucket {} {} ({} grads)", bucket,
                         format_bytes(static_cast<double>(b.bytes)), b.grads.size());
    }
    case Type::collective: {
      const std::string what =
          call.unit >= 0 && call.unit < static_cast<int>(plan.sharded.units.size())
              ? fmt::format("unit {}", plan.sharded.units[static_cast<size_t>(call.unit)].name.empty()
                                           ? "(root)"
                                           : plan.sharded.units[static_cast<size_t>(call.unit)].name)
          : call.bucket >= 0 ? fmt::format("bucket {}", call.bucket)
                             : std::string(call_payload(call));
      std::string line = fmt::format("{:<8} {:<12} {} #{} {} {}", to_string(stream), to_string(call.kind),
                                     to_string(call.group), call.index, what, format_bytes(call.bytes));
      if (buffers)
        line += fmt::format(" [{}+{} -> {}+{}, {} per rank]", to_string(static_cast<Buffer>(buffers->send_buffer)),
                            buffers->send_offset, to_string(static_cast<Buffer>(buffers->recv_buffer)),
                            buffers->recv_offset, buffers->count);
      return line;
    }
    case Type::optimizer:
      return fmt::format("compute  optimizer    {} parameters, {}",
                         format_count(static_cast<double>(plan.optimizer.parameters)),
                         format_bytes(plan.optimizer.bytes));
    case Type::mark: return fmt::format("{:<8} timing-event {}[{}]", to_string(stream), to_string(mark_kind), index);
    case Type::stage_work: return fmt::format("{:<8} timing-event {} begins", to_string(stream), to_string(work));
    case Type::send:
    case Type::recv: {
      std::string line = fmt::format("{:<8} {:<12} {} stage {} {} {} (batch {})", to_string(stream),
                                     type == Type::send ? "send" : "recv", type == Type::send ? "to" : "from", p2p.peer,
                                     to_string(p2p.moves), format_bytes(p2p.bytes), batch);
      if (buffers)
        line += fmt::format(
            " [{}+{}, {} elements]",
            to_string(static_cast<Buffer>(type == Type::send ? buffers->send_buffer : buffers->recv_buffer)),
            type == Type::send ? buffers->send_offset : buffers->recv_offset, buffers->count);
      return line;
    }
  }
  return "?";
}

std::string describe_launches(const StepPlan& plan, const std::vector<Launch>& launches) {
  std::string out =
      fmt::format("# dpsim measure --dry-run: {} ({} GPU(s), micro-batch {}, sequence {}, accumulation {})\n",
                  plan.scenario, plan.world_size, plan.micro_batch, plan.sequence_length, plan.gradient_accumulation);
  out += fmt::format("# {} ops, {} gradients, {} buckets, sharding {}; {} launches per GPU per step\n", plan.ops.size(),
                     plan.grads.size(), plan.buckets.size(), to_string(plan.sharded.sharding), launches.size());
  for (size_t i = 0; i < launches.size(); ++i) out += fmt::format("{:6}  {}\n", i, launches[i].describe(plan));
  return out;
}

std::string describe_dry_run(const StepPlan& plan, int element_bytes, bool gradient_as_bucket_view) {
  const StepProgram program = make_step_program(plan);
  const bool staged = program.classes.size() > 1;
  std::string out;
  const PreparedStep step = prepare_step(plan, plan.gradient_accumulation);
  for (size_t c = 0; c < program.classes.size(); ++c) {
    const int stage = static_cast<int>(c);
    const StepLayout layout = make_layout(plan, element_bytes, gradient_as_bucket_view, staged ? stage : -1);
    // Rank 0's buffers (of the stage's first data-parallel rank), as the CUDA executor allocates them.
    const ShardBuffers buffers = plan_shard_buffers(plan, program, layout, 0, 0, stage);
    DryRunExecutor dry(&buffers);
    WalkOptions wo;
    wo.gradient_accumulation = plan.gradient_accumulation;
    wo.stage = stage;
    walk_step(plan, layout, wo, step, dry);
    if (staged)
      out += fmt::format("# pipeline stage {} of {} ({}, {} GPU(s) run it)\n", stage, program.classes.size(),
                         program.classes[c].rank_class, program.classes[c].ranks);
    out += describe_launches(plan, dry.launches()) + describe_buffers(buffers, layout.element_bytes);
  }
  return out;
}

}  // namespace dpsim::backend
