// Pipeline parallelism's step program: one rank class per pipeline stage, each running its slots of the schedule
// (core/pipeline_schedule.cpp, Megatron-LM's orders) on its compute stream. A forward slot waits for the previous
// virtual stage's activations, runs its chunk's ops, and sends its output on; a backward slot waits for the next
// virtual stage's gradient, runs the chunk's backward, and sends the input gradient back. The sends are blocking
// point-to-point calls on the compute stream (Megatron's send_forward / send_backward, batched isend/irecv then wait:
// megatron/core/pipeline_parallel/p2p_communication.py); the receiving stage waits for the send's event. The
// stage's gradients are bucketed as DDP's (plan.cpp, per stage) and reduced over the stage's data-parallel group as
// the last micro-batch's backward completes each bucket (Megatron's overlap_grad_reduce), then the stage's optimizer.
#include <fmt/format.h>

#include <map>

#include "program_builder.hpp"

namespace dpsim::program_detail {

namespace {

struct StageBuilder {
  const StepPlan& plan;
  int stage = 0;
  Builder bld;
  std::vector<std::vector<int>> ops_of;           // per virtual stage: op indices, forward order
  std::map<int, std::vector<int>> buckets_after;  // op -> the stage's buckets its backward completes

  int vstages() const { return plan.pipeline.stages * plan.pipeline.virtual_stages; }
  int event_index(int micro, int vstage) const { return micro * vstages() + vstage; }

  void send(int micro, int vstage, EventKind kind) {
    constexpr int compute = StepProgram::kCompute;
    bld.call(compute, {.kind = CollectiveKind::send,
                       .group = GroupKind::pipeline,
                       .bytes = plan.pipeline.boundary_bytes,
                       .inputs_ready = {},
                       .backward = kind == EventKind::gradient_sent});
    bld.record(compute, {kind, event_index(micro, vstage)});
  }

  void forward(int micro, int vstage) {
    constexpr int compute = StepProgram::kCompute;
    if (vstage > 0) bld.wait(compute, {EventKind::activation_sent, event_index(micro, vstage - 1)});
    for (int o : ops_of[static_cast<size_t>(vstage)])
      compute_op(bld, plan, {.type = Instr::Type::forward, .stream = compute, .op = o, .micro = micro});
    if (vstage < vstages() - 1) send(micro, vstage, EventKind::activation_sent);
  }

  void backward(int micro, int vstage) {
    constexpr int compute = StepProgram::kCompute;
    if (vstage < vstages() - 1) bld.wait(compute, {EventKind::gradient_sent, event_index(micro, vstage + 1)});
    const bool last = micro == plan.pipeline.micro_batches - 1;  // every chunk's last backward is the last micro's
    const auto& ops = ops_of[static_cast<size_t>(vstage)];
    for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
      compute_op(bld, plan,
                 {.type = Instr::Type::backward, .stream = compute, .op = *it, .micro = micro, .sync = last});
      if (!last || !buckets_after.count(*it)) continue;
      for (int b : buckets_after.at(*it)) {
        bld.record(compute, {EventKind::bucket_ready, b});
        bucket_allreduce(bld, plan, b, false);
      }
    }
    if (vstage > 0) send(micro, vstage, EventKind::gradient_sent);
  }

  void optimizer() {
    constexpr int compute = StepProgram::kCompute;
    int last_bucket = -1;
    for (const Bucket& b : plan.buckets)
      if (b.stage == stage) last_bucket = b.index;
    if (last_bucket >= 0) bld.wait(compute, {EventKind::bucket_done, last_bucket});
    bld.mark(compute, Mark::optimizer_begin, 0);
    if (last_bucket >= 0) bld.push({.type = Instr::Type::unflatten, .stream = compute});
    bld.push({.type = Instr::Type::optimizer, .stream = compute});
    if (plan.sharded.sharding == Sharding::zero1) gather_updated_weights(bld, plan, stage);
    bld.mark(compute, Mark::optimizer_end, 0);
  }
};

}  // namespace

StepProgram pipeline_program(const StepPlan& plan, const ProgramOptions& options) {
  if (!options.overlap)
    throw RuntimeError("--no-overlap: the pipeline's data-parallel reductions always overlap the last backward");
  const PipelinePlan& pp = plan.pipeline;
  StepProgram program;
  program.streams = {"compute", "comm"};
  program.dims = program_dims(plan);
  program.micro_steps = pp.micro_batches;
  const auto slots = pipeline_schedule(pp.schedule, pp.stages, pp.micro_batches, pp.virtual_stages);
  for (int stage = 0; stage < pp.stages; ++stage) {
    StageBuilder sb{
        plan, stage, {}, std::vector<std::vector<int>>(static_cast<size_t>(pp.stages * pp.virtual_stages)), {}};
    for (size_t o = 0; o < plan.ops.size(); ++o)
      sb.ops_of[static_cast<size_t>(pp.virtual_stage_of_op[o])].push_back(static_cast<int>(o));
    for (const Bucket& b : plan.buckets)
      if (b.stage == stage)
        sb.buckets_after[backward_op(plan, static_cast<size_t>(b.ready_after_backward_op))].push_back(b.index);
    sb.bld.rank.rank_class = fmt::format("pipeline stage {}", stage);
    sb.bld.rank.ranks = plan.world_size / pp.stages;
    sb.bld.rank.stage = stage;
    if (!program.classes.empty()) {  // a stage runs about as many instructions as the one before: grown once at most
      sb.bld.rank.instrs.reserve(program.classes.back().instrs.size());
      sb.bld.rank.comms.reserve(program.classes.back().comms.size());
    }
    sb.bld.mark(StepProgram::kCompute, Mark::step_begin, 0);
    for (const PipelineSlot& slot : slots[static_cast<size_t>(stage)]) {
      const int vstage = virtual_stage(stage, slot.chunk, pp.stages);
      if (slot.forward)
        sb.forward(slot.micro, vstage);
      else
        sb.backward(slot.micro, vstage);
    }
    sb.optimizer();
    program.classes.push_back(std::move(sb.bld.rank));
  }
  return program;
}

}  // namespace dpsim::program_detail
