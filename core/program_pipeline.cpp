// Pipeline parallelism's step program: one rank class per pipeline stage, each running its slots of the schedule
// (core/pipeline_schedule.cpp, Megatron-LM's orders) on its compute stream. A forward slot waits for the previous
// virtual stage's activations, runs its chunk's ops, and sends its output on; a backward slot waits for the next
// virtual stage's gradient, runs the chunk's backward, and sends the input gradient back. The sends are blocking
// point-to-point calls on the compute stream (Megatron's send_forward / send_backward, batched isend/irecv then wait:
// megatron/core/pipeline_parallel/p2p_communication.py); the receiving stage waits for the send's event. The
// stage's gradients are bucketed as DDP's (plan.cpp, per stage) and reduced over the stage's data-parallel group as
// the last micro-batch's backward completes each bucket (Megatron's overlap_grad_reduce), then the stage's optimizer.
// Without overlap (ddp.overlap_grad_reduce false, Megatron's local DDP, or predict --no-overlap) the stage's buckets
// are reduced after its last slot (megatron/training.py train_step: allreduce_gradients() after forward_backward).
// Sends and receives are numbered into batches (Instr::batch), each posted as one NCCL group: between two compute
// slots, a slot's send and the next slot's receive are one batch when both go to the same neighbour (Megatron's
// forward_backward_pipelining_without_interleaving: send_forward_recv_backward, send_backward_recv_forward, each one
// _communicate), else two (its warm-up's send_forward, then recv_forward); under interleaving always one (the
// interleaved schedule's send_forward_recv_forward and send_backward_recv_backward pair a send to one neighbour with
// a receive from the other). p2p_batch.cpp checks that no stage can wait for ever: in the interleaved steady state this
// order (each send right after its slot, as the simulator times it) deadlocks, and the GPU backend refuses it.
#include <fmt/format.h>

#include <map>

#include "program_builder.hpp"

namespace dpsim::program_detail {

namespace {

struct StageBuilder {
  const StepPlan& plan;
  int stage = 0;
  Builder bld;
  bool overlap = true;                            // reduce each bucket as the last backward completes it
  std::vector<int> deferred;                      // without overlap: the buckets, reduced after the last slot
  std::vector<std::vector<int>> ops_of;           // per virtual stage: op indices, forward order
  std::map<int, std::vector<int>> buckets_after;  // op -> the stage's buckets its backward completes

  int batches = 0;     // batches numbered so far
  int open_peer = -1;  // the peer of the open batch's send; -1: no batch open (a compute slot began since)

  int vstages() const { return plan.pipeline.stages * plan.pipeline.virtual_stages; }
  int event_index(int micro, int vstage) const { return micro * vstages() + vstage; }
  int stage_of(int vstage) const { return vstage % plan.pipeline.stages; }

  // The batch of a send (always a new one) or a receive (the open one where the rule above pairs them).
  int batch_for(int peer, bool send) {
    const bool interleaved = plan.pipeline.virtual_stages > 1;
    if (send || open_peer < 0 || !(interleaved || peer == open_peer)) ++batches;
    open_peer = send ? peer : -1;
    return batches - 1;
  }

  void send(int micro, int vstage, EventKind kind) {
    constexpr int compute = StepProgram::kCompute;
    const int peer = stage_of(kind == EventKind::gradient_sent ? vstage - 1 : vstage + 1);
    const EventRef event{kind, event_index(micro, vstage)};
    bld.call(compute, {.kind = CollectiveKind::send,
                       .group = GroupKind::pipeline,
                       .bytes = plan.pipeline.boundary_bytes,
                       .inputs_ready = {},
                       .backward = kind == EventKind::gradient_sent,
                       .peer = peer,
                       .delivers = event});
    bld.rank.instrs.back().batch = batch_for(peer, true);
    bld.record(compute, event);
  }

  // The wait for a neighbour's send: the receive.
  void receive(int micro, int from_vstage, EventKind kind) {
    bld.wait(StepProgram::kCompute, {kind, event_index(micro, from_vstage)});
    bld.rank.instrs.back().batch = batch_for(stage_of(from_vstage), false);
  }

  void forward(int micro, int vstage) {
    constexpr int compute = StepProgram::kCompute;
    if (vstage > 0) receive(micro, vstage - 1, EventKind::activation_sent);
    open_peer = -1;
    for (int o : ops_of[static_cast<size_t>(vstage)])
      compute_op(bld, plan, {.type = Instr::Type::forward, .stream = compute, .op = o, .micro = micro});
    if (vstage < vstages() - 1) send(micro, vstage, EventKind::activation_sent);
  }

  void backward(int micro, int vstage) {
    constexpr int compute = StepProgram::kCompute;
    if (vstage < vstages() - 1) receive(micro, vstage + 1, EventKind::gradient_sent);
    open_peer = -1;
    const bool last = micro == plan.pipeline.micro_batches - 1;  // every chunk's last backward is the last micro's
    const auto& ops = ops_of[static_cast<size_t>(vstage)];
    for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
      compute_op(bld, plan,
                 {.type = Instr::Type::backward, .stream = compute, .op = *it, .micro = micro, .sync = last});
      if (!last || !buckets_after.count(*it)) continue;
      for (int b : buckets_after.at(*it)) {
        bld.record(compute, {EventKind::bucket_ready, b});
        if (overlap)
          bucket_allreduce(bld, plan, b, false);
        else
          deferred.push_back(b);
      }
    }
    if (vstage > 0) send(micro, vstage, EventKind::gradient_sent);
  }

  void reduce_deferred() {
    if (deferred.empty()) return;
    bld.record(StepProgram::kCompute, {EventKind::backward_done, 0});
    for (int b : deferred) bucket_allreduce(bld, plan, b, b == deferred.front());
  }

  void optimizer() {
    constexpr int compute = StepProgram::kCompute;
    int last_bucket = -1;
    for (const Bucket& b : plan.buckets)
      if (b.stage == stage) last_bucket = b.index;
    if (last_bucket >= 0) bld.wait(compute, {EventKind::bucket_done, last_bucket});
    // A tied word embedding: the first and the last stage all-reduce its gradient, blocking, after the data-parallel
    // reductions (plan.hpp PipelinePlan::embedding_grad_bytes). Each stage times its own call: the last stage, done
    // with its backward earlier, would wait for the first in a real run, but the first ends the step either way.
    if (plan.pipeline.embedding_grad_bytes > 0 && (stage == 0 || stage == plan.pipeline.stages - 1))
      bld.call(compute, {.kind = CollectiveKind::all_reduce,
                         .group = GroupKind::embedding,
                         .bytes = plan.pipeline.embedding_grad_bytes,
                         .inputs_ready = {},
                         .backward = true});
    bld.mark(compute, Mark::optimizer_begin, 0);
    if (last_bucket >= 0) bld.push({.type = Instr::Type::unflatten, .stream = compute});
    bld.push({.type = Instr::Type::optimizer, .stream = compute});
    if (plan.sharded.sharding == Sharding::zero1) gather_updated_weights(bld, plan, stage);
    bld.mark(compute, Mark::optimizer_end, 0);
  }
};

}  // namespace

StepProgram pipeline_program(const StepPlan& plan, const ProgramOptions& options) {
  const PipelinePlan& pp = plan.pipeline;
  StepProgram program;
  program.streams = {"compute", "comm"};
  program.dims = program_dims(plan);
  program.micro_steps = pp.micro_batches;
  const auto slots = pipeline_schedule(pp.schedule, pp.stages, pp.micro_batches, pp.virtual_stages);
  for (int stage = 0; stage < pp.stages; ++stage) {
    StageBuilder sb{plan, stage,
                    {},   options.overlap,
                    {},   std::vector<std::vector<int>>(static_cast<size_t>(pp.stages * pp.virtual_stages)),
                    {}};
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
    sb.reduce_deferred();
    sb.optimizer();
    program.classes.push_back(std::move(sb.bld.rank));
  }
  return program;
}

}  // namespace dpsim::program_detail
