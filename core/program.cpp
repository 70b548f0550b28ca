// The step program (written once) and its walker.
#include "dpsim/program.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "dpsim/error.hpp"
#include "program_builder.hpp"

namespace dpsim {

double blocking_call_s(const CommCall& call, double comm_s, const OpSeconds& op_s, int tensor, int sm_count,
                       const NcclModel& nccl) {
  if (call.tp_overlap == TpOverlap::none || call.overlap_op < 0) return comm_s;
  const auto o = static_cast<size_t>(call.overlap_op);
  const double op_phase_s = call.overlap_backward ? op_s.backward.at(o) : op_s.forward.at(o);
  const double gemm_s = call.overlap_share > 0  ? op_phase_s * call.overlap_share
                        : call.overlap_backward ? op_phase_s / 2
                                                : op_phase_s;
  return tp_overlap_exposed_s(call.tp_overlap, comm_s, gemm_s, tensor, sm_count, nccl);
}

const char* to_string(Mark mark) {
  switch (mark) {
    case Mark::step_begin: return "step_begin";
    case Mark::forward_begin: return "forward_begin";
    case Mark::forward_end: return "forward_end";
    case Mark::backward_end: return "backward_end";
    case Mark::bucket_start: return "bucket_start";
    case Mark::bucket_end: return "bucket_end";
    case Mark::optimizer_begin: return "optimizer_begin";
    case Mark::optimizer_end: return "optimizer_end";
  }
  return "?";
}

const char* to_string(EventKind kind) {
  switch (kind) {
    case EventKind::none: return "none";
    case EventKind::bucket_ready: return "bucket_ready";
    case EventKind::bucket_done: return "bucket_done";
    case EventKind::backward_done: return "backward_done";
    case EventKind::gathered: return "gathered";
    case EventKind::unit_forward: return "unit_forward";
    case EventKind::unit_backward: return "unit_backward";
    case EventKind::reduced: return "reduced";
    case EventKind::all_reduced: return "all_reduced";
    case EventKind::optimizer_done: return "optimizer_done";
    case EventKind::activation_sent: return "activation_sent";
    case EventKind::gradient_sent: return "gradient_sent";
  }
  return "?";
}

const char* to_string(Instr::Type type) {
  switch (type) {
    case Instr::Type::forward: return "forward";
    case Instr::Type::backward: return "backward";
    case Instr::Type::collective: return "collective";
    case Instr::Type::record: return "record";
    case Instr::Type::wait: return "wait";
    case Instr::Type::unflatten: return "unflatten";
    case Instr::Type::optimizer: return "optimizer";
    case Instr::Type::mark: return "mark";
  }
  return "?";
}

Phase Instr::phase() const {
  switch (type) {
    case Type::forward: return Phase::forward;
    case Type::backward: return Phase::backward;
    default: return Phase::optimizer;
  }
}

namespace program_detail {

// One DDP bucket on the comm stream: wait for its gradients, all-reduce over the data group, signal done.
void bucket_allreduce(Builder& bld, const StepPlan& plan, int b, bool wait_backward) {
  constexpr int comm = StepProgram::kComm;
  bld.wait(comm, {EventKind::bucket_ready, b});
  if (wait_backward) bld.wait(comm, {EventKind::backward_done, 0});
  bld.mark(comm, Mark::bucket_start, b);
  const bool sharded = plan.sharded.sharding == Sharding::zero1;
  bld.call(comm, {.kind = sharded ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce,
                  .group = GroupKind::data,
                  .bytes = static_cast<double>(plan.buckets[static_cast<size_t>(b)].bytes),
                  .bucket = b,
                  .inputs_ready = {EventKind::bucket_ready, b}});
  bld.mark(comm, Mark::bucket_end, b);
  bld.record(comm, {EventKind::bucket_done, b});
}

// zero1 after the sharded update: each bucket's updated weights all-gathered, in bucket order; the step ends when
// the last is in (DeepSpeed stage 1 and Megatron's distributed optimizer gather the parameters after the step).
void gather_updated_weights(Builder& bld, const StepPlan& plan, int stage) {
  constexpr int compute = StepProgram::kCompute, comm = StepProgram::kComm;
  bld.record(compute, {EventKind::optimizer_done, 0});
  bld.wait(comm, {EventKind::optimizer_done, 0});
  int last = -1;
  for (const Bucket& b : plan.buckets) {
    if (stage >= 0 && b.stage != stage) continue;
    last = bld.call(comm, {.kind = CollectiveKind::all_gather,
                           .group = GroupKind::data,
                           .bytes = static_cast<double>(b.bytes) * plan.sharded.param_per_grad_bytes,
                           .bucket = -1,
                           .inputs_ready = {EventKind::optimizer_done, 0}});
  }
  if (last < 0) return;
  bld.record(comm, {EventKind::gathered, last});
  bld.wait(compute, {EventKind::gathered, last});
}

}  // namespace program_detail

namespace {
using namespace program_detail;

// Buckets completed after each backward position, checked to come in bucket order (DDP launches them so).
std::map<int, std::vector<int>> buckets_by_position(const StepPlan& plan) {
  std::map<int, std::vector<int>> at;
  const int nbuckets = static_cast<int>(plan.buckets.size());
  int never = 0;
  for (int b = 0; b < nbuckets; ++b) {
    const int pos = plan.buckets[static_cast<size_t>(b)].ready_after_backward_op;
    if (pos < 0 || pos >= static_cast<int>(plan.backward_order.size()))
      ++never;
    else
      at[pos].push_back(b);
  }
  if (never > 0)
    throw RuntimeError(
        fmt::format("plan: {} bucket(s) never complete (ready_after_backward_op beyond the backward)", never));
  int expected = 0;
  for (auto& [pos, list] : at) {
    std::sort(list.begin(), list.end());
    for (int b : list) {
      if (b != expected)
        throw RuntimeError(
            fmt::format("plan bucket {} completes before bucket {}: DDP launches buckets strictly in "
                        "order",
                        b, expected));
      ++expected;
    }
  }
  return at;
}

// DDP, and zero1 (the same buckets reduce-scattered, the update on the shard, the weights all-gathered).
StepProgram ddp_program(const StepPlan& plan, const ProgramOptions& options) {
  constexpr int compute = StepProgram::kCompute;
  StepProgram program;
  program.streams = {"compute", "comm"};
  program.dims = program_dims(plan);
  program.micro_steps = micro_steps(plan, options);
  const auto completes_at = buckets_by_position(plan);
  const int nbuckets = static_cast<int>(plan.buckets.size());
  const int nops = static_cast<int>(plan.ops.size());

  Builder bld = every_rank(plan);
  bld.mark(compute, Mark::step_begin, 0);
  for (int micro = 0; micro < program.micro_steps; ++micro) {
    const bool sync = micro == program.micro_steps - 1;  // DDP: no_sync() on the first k-1 micro-steps
    bld.mark(compute, Mark::forward_begin, micro);
    for (int o = 0; o < nops; ++o)
      compute_op(bld, plan, {.type = Instr::Type::forward, .stream = compute, .op = o, .micro = micro});
    bld.mark(compute, Mark::forward_end, micro);
    std::vector<int> deferred;  // no overlap: buckets issued once the backward is done
    for (size_t pos = 0; pos < plan.backward_order.size(); ++pos) {
      const int o = backward_op(plan, pos);
      compute_op(bld, plan, {.type = Instr::Type::backward, .stream = compute, .op = o, .micro = micro, .sync = sync});
      if (!sync) continue;
      const auto it = completes_at.find(static_cast<int>(pos));
      if (it == completes_at.end()) continue;
      for (int b : it->second) {
        bld.record(compute, {EventKind::bucket_ready, b});
        if (options.overlap)
          bucket_allreduce(bld, plan, b, false);
        else
          deferred.push_back(b);
      }
    }
    bld.mark(compute, Mark::backward_end, micro);
    if (sync && !options.overlap) {
      bld.record(compute, {EventKind::backward_done, 0});
      for (int b : deferred) bucket_allreduce(bld, plan, b, b == deferred.front());
    }
  }
  if (nbuckets > 0) bld.wait(compute, {EventKind::bucket_done, nbuckets - 1});
  // The optimizer phase begins here: the copy of the reduced buckets back into the gradients (a no-op where
  // gradients are bucket views) counts as optimizer time in every executor, not as exposed communication.
  bld.mark(compute, Mark::optimizer_begin, 0);
  if (nbuckets > 0) bld.push({.type = Instr::Type::unflatten, .stream = compute});
  bld.push({.type = Instr::Type::optimizer, .stream = compute});
  if (plan.sharded.sharding == Sharding::zero1) gather_updated_weights(bld, plan, -1);
  bld.mark(compute, Mark::optimizer_end, 0);
  program.classes.push_back(std::move(bld.rank));
  return program;
}

}  // namespace

StepProgram make_step_program(const StepPlan& plan, const ProgramOptions& options) {
  if (plan.sharded.deepspeed) return program_detail::deepspeed_program(plan, options);
  ProgramOptions buckets = options;  // DDP buckets: the scenario's ddp.overlap_grad_reduce or predict --no-overlap
  buckets.overlap = options.overlap && plan.overlap_grad_reduce;
  if (plan.pipeline.stages > 1) return program_detail::pipeline_program(plan, buckets);  // FSDP's per stage too
  if (plan.sharded.sharding == Sharding::zero2 || plan.sharded.sharding == Sharding::zero3)
    return program_detail::fsdp_program(plan, options);
  return ddp_program(plan, buckets);
}

std::string describe(const Instr& in, const StepProgram& program, const RankProgram& rank) {
  const std::string stream = in.stream >= 0 && in.stream < static_cast<int>(program.streams.size())
                                 ? program.streams[static_cast<size_t>(in.stream)]
                                 : fmt::format("stream{}", in.stream);
  switch (in.type) {
    case Instr::Type::forward:
    case Instr::Type::backward:
      return fmt::format("{} {} op {} micro {}{}", stream, to_string(in.type), in.op, in.micro,
                         in.type == Instr::Type::backward && in.sync ? " sync" : "");
    case Instr::Type::collective: {
      const CommCall& c = rank.comms.at(static_cast<size_t>(in.comm));
      return fmt::format("{} collective {} {} #{} bucket {}", stream, to_string(c.kind), to_string(c.group), c.index,
                         c.bucket);
    }
    case Instr::Type::record:
    case Instr::Type::wait:
      return fmt::format("{} {} {}[{}]", stream, to_string(in.type), to_string(in.event.kind), in.event.index);
    case Instr::Type::mark: return fmt::format("{} mark {}[{}]", stream, to_string(in.mark), in.mark_index);
    case Instr::Type::unflatten:
    case Instr::Type::optimizer: return fmt::format("{} {}", stream, to_string(in.type));
  }
  return "?";
}

namespace {

using Recorded = EventMap<bool>;  // the events of its own class recorded so far

void check_instr(const StepProgram& program, const RankProgram& rank, const Instr& in, const Recorded& recorded) {
  if (in.stream < 0 || in.stream >= static_cast<int>(program.streams.size()))
    throw RuntimeError(fmt::format("program ({}): {} on stream {}, which does not exist", rank.rank_class,
                                   to_string(in.type), in.stream));
  if (in.type == Instr::Type::collective && (in.comm < 0 || in.comm >= static_cast<int>(rank.comms.size())))
    throw RuntimeError(fmt::format("program ({}): collective {} out of range", rank.rank_class, in.comm));
  if (in.type == Instr::Type::wait && !crosses_classes(in.event.kind) && !recorded.contains(in.event))
    throw RuntimeError(fmt::format(
        "program ({}): stream {} waits for {}[{}] before it is recorded: no executor "
        "could run it",
        rank.rank_class, program.streams[static_cast<size_t>(in.stream)], to_string(in.event.kind), in.event.index));
}

void execute(const RankProgram& rank, const Instr& in, StepExecutor& ex, Recorded& recorded) {
  switch (in.type) {
    case Instr::Type::forward: ex.forward(in); break;
    case Instr::Type::backward: ex.backward(in); break;
    case Instr::Type::collective: ex.collective(in, rank.comms[static_cast<size_t>(in.comm)]); break;
    case Instr::Type::record:
      if (!crosses_classes(in.event.kind)) recorded[in.event] = true;  // what check_instr asks about
      ex.record(in);
      break;
    case Instr::Type::wait: ex.wait(in); break;
    case Instr::Type::unflatten: ex.unflatten(in); break;
    case Instr::Type::optimizer: ex.optimizer(in); break;
    case Instr::Type::mark: ex.mark(in); break;
  }
}

}  // namespace

void walk_classes(const StepProgram& program, const std::vector<StepExecutor*>& executors) {
  if (executors.size() != program.classes.size())
    throw RuntimeError(
        fmt::format("walk_classes: {} executors for {} rank classes", executors.size(), program.classes.size()));
  std::vector<size_t> at(program.classes.size(), 0);
  std::vector<Recorded> recorded(program.classes.size());
  Recorded crossed;  // cross-class events recorded so far, by any class
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t c = 0; c < program.classes.size(); ++c) {
      const RankProgram& rank = program.classes[c];
      for (; at[c] < rank.instrs.size(); ++at[c]) {
        const Instr& in = rank.instrs[at[c]];
        check_instr(program, rank, in, recorded[c]);
        if (in.type == Instr::Type::wait && crosses_classes(in.event.kind) && !crossed.contains(in.event)) break;
        execute(rank, in, *executors[c], recorded[c]);
        if (in.type == Instr::Type::record && crosses_classes(in.event.kind)) crossed[in.event] = true;
        progress = true;
      }
    }
  }
  for (size_t c = 0; c < program.classes.size(); ++c)
    if (at[c] < program.classes[c].instrs.size())
      throw RuntimeError(fmt::format("program ({}): waits for {} that no rank class records: the schedule deadlocks",
                                     program.classes[c].rank_class,
                                     describe(program.classes[c].instrs[at[c]], program, program.classes[c])));
}

void walk_program(const StepProgram& program, const RankProgram& rank, StepExecutor& ex) {
  Recorded recorded;
  for (const Instr& in : rank.instrs) {
    check_instr(program, rank, in, recorded);
    execute(rank, in, ex, recorded);
  }
}

}  // namespace dpsim
