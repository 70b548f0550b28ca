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
// _communicate), else two (its warm-up's send_forward, then recv_forward). Interleaving posts as Megatron does
// (StageBuilder::interleaved): each receive in the group after the slot before it, and in the steady state a
// forward's output after the backward that follows it, with its input gradient and the next pair's receives.
// p2p_batch.cpp checks that no stage can wait for ever (slot order, each send right after its slot, deadlocks under
// interleaving once posted as blocking groups).
// FSDP's full_shard under pipelining (torchtitan, NeMo Automodel; plan.cpp fsdp_units wraps each virtual stage's
// module): the stage's units are all-gathered at the step's start on the comm stream and kept (reshard_after_forward
// false), each unit's first forward waiting for its gather; their gradients accumulate unsharded and each unit is
// reduce-scattered once the last micro-batch's backward is done with it (PyTorch's pipelining stage syncs FSDP's
// gradients on the last backward only, torch/distributed/pipelining/stage.py backward_maybe_with_nosync); the
// optimizer waits for the last reduce-scatter and updates the shard.
#include <fmt/format.h>

#include <map>
#include <optional>

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

  // full_shard: the stage's units in order of first forward, each unit's gather, and per op the unit it opens (its
  // first op: the gather to wait for) or closes in the backward (its first op too: the backward runs it last).
  std::vector<int> units{};
  std::map<int, int> gather_of{};          // unit -> its all-gather's call
  std::map<int, int> unit_opened_by_op{};  // a unit's first op -> the unit
  int last_reduced = -1;                   // the stage's last reduce-scatter's unit

  int vstages() const { return plan.pipeline.stages * plan.pipeline.virtual_stages; }
  int event_index(int micro, int vstage) const { return micro * vstages() + vstage; }
  int stage_of(int vstage) const { return vstage % plan.pipeline.stages; }

  // Without interleaving: the batch of a send (always a new one) or a receive (the open one where the rule above
  // pairs them: a receive from the peer the last send went to).
  int batch_for(int peer, bool send) {
    if (send || open_peer < 0 || peer != open_peer) ++batches;
    open_peer = send ? peer : -1;
    return batches - 1;
  }

  static int peer_of_send(int vstage, EventKind kind) {
    return kind == EventKind::gradient_sent ? vstage - 1 : vstage + 1;
  }

  // The send of virtual stage `vstage`'s output (activations) or input gradient, in batch `batch` (-1: by the 1F1B
  // pairing rule above).
  void send(int micro, int vstage, EventKind kind, int batch = -1) {
    constexpr int compute = StepProgram::kCompute;
    const int peer = stage_of(peer_of_send(vstage, kind));
    const EventRef event{kind, event_index(micro, vstage)};
    bld.call(compute, {.kind = CollectiveKind::send,
                       .group = GroupKind::pipeline,
                       .bytes = plan.pipeline.boundary_bytes,
                       .inputs_ready = {},
                       .backward = kind == EventKind::gradient_sent,
                       .peer = peer,
                       .delivers = event});
    bld.rank.instrs.back().batch = batch >= 0 ? batch : batch_for(peer, true);
    bld.record(compute, event);
  }

  // The wait for a neighbour's send: the receive.
  void receive(int micro, int from_vstage, EventKind kind, int batch = -1) {
    bld.wait(StepProgram::kCompute, {kind, event_index(micro, from_vstage)});
    bld.rank.instrs.back().batch = batch >= 0 ? batch : batch_for(stage_of(from_vstage), false);
  }

  void forward(int micro, int vstage) {
    if (vstage > 0) receive(micro, vstage - 1, EventKind::activation_sent);
    forward_compute(micro, vstage);
    if (vstage < vstages() - 1) send(micro, vstage, EventKind::activation_sent);
  }

  void backward(int micro, int vstage) {
    if (vstage < vstages() - 1) receive(micro, vstage + 1, EventKind::gradient_sent);
    backward_compute(micro, vstage);
    if (vstage > 0) send(micro, vstage, EventKind::gradient_sent);
  }

  void forward_compute(int micro, int vstage) {
    open_peer = -1;
    for (int o : ops_of[static_cast<size_t>(vstage)]) {
      if (micro == 0)
        if (const auto u = unit_opened_by(o)) bld.wait(kCompute, {EventKind::gathered, gather_of.at(*u)});
      compute_op(bld, plan, {.type = Instr::Type::forward, .stream = StepProgram::kCompute, .op = o, .micro = micro});
    }
  }

  std::optional<int> unit_opened_by(int op) const {
    const auto it = unit_opened_by_op.find(op);
    return it == unit_opened_by_op.end() ? std::nullopt : std::optional<int>(it->second);
  }

  // full_shard: every unit of the stage gathered at the step's start, in order of first forward.
  void gather_units() {
    for (int u : units) {
      const ShardUnit& unit = plan.sharded.units[static_cast<size_t>(u)];
      const int index = bld.call(kComm, {.kind = CollectiveKind::all_gather,
                                         .group = GroupKind::data,
                                         .bytes = unit.gather_bytes,
                                         .unit = u,
                                         .inputs_ready = {EventKind::unit_forward, -1}});
      bld.record(kComm, {EventKind::gathered, index});
      gather_of[u] = index;
    }
  }

  // full_shard: the unit's accumulated gradients reduce-scattered once the last micro-batch's backward is done with it.
  void reduce_unit(int u) {
    const ShardUnit& unit = plan.sharded.units[static_cast<size_t>(u)];
    if (unit.reduce_bytes <= 0) return;  // nothing of the unit trains
    const EventRef ready{EventKind::unit_backward, u};
    bld.record(kCompute, ready);
    bld.wait(kComm, ready);
    bld.call(kComm, {.kind = CollectiveKind::reduce_scatter,
                     .group = GroupKind::data,
                     .bytes = unit.reduce_bytes,
                     .unit = u,
                     .inputs_ready = ready});
    bld.record(kComm, {EventKind::reduced, u});
    last_reduced = u;
  }

  void backward_compute(int micro, int vstage) {
    constexpr int compute = StepProgram::kCompute;
    open_peer = -1;
    const bool last = micro == plan.pipeline.micro_batches - 1;  // every chunk's last backward is the last micro's
    const auto& ops = ops_of[static_cast<size_t>(vstage)];
    for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
      compute_op(bld, plan,
                 {.type = Instr::Type::backward, .stream = compute, .op = *it, .micro = micro, .sync = last});
      if (last)
        if (const auto u = unit_opened_by(*it)) reduce_unit(*u);
      if (!last || !buckets_after.count(*it)) continue;
      for (int b : buckets_after.at(*it)) {
        bld.record(compute, {EventKind::bucket_ready, b});
        if (overlap)
          bucket_allreduce(bld, plan, b, false);
        else
          deferred.push_back(b);
      }
    }
  }

  // Interleaved 1F1B as Megatron posts it without overlap_p2p_comm (schedules.py @d98e8a6,
  // forward_backward_pipelining_with_interleaving): the first forward's input alone ("input_tensors[0].append(
  // p2p_communicator.recv_forward(...))"); after each warm-up forward one batch, its output and the next forward's
  // input (send_forward_recv_forward), with the first backward's gradient after the last warm-up forward
  // (send_forward_backward_recv_forward_backward(output_tensor, None, recv_prev, recv_next=True)); in the steady
  // state a forward and a backward, then one batch of both sends and both receives ("# Send output_tensor and
  // input_tensor_grad, receive input_tensor and output_tensor_grad.", send_forward_backward_recv_forward_backward;
  // "If last iteration, don't receive"); in the cool-down a backward, then its send and the next backward's gradient
  // (send_backward_recv_backward). A forward's output reaches the next stage only after this stage's backward.
  void interleaved(const std::vector<PipelineSlot>& slots, int warmup) {
    std::vector<std::pair<int, int>> fwd, bwd;  // (micro, virtual stage) of forward k and backward k
    for (const PipelineSlot& s : slots)
      (s.forward ? fwd : bwd).emplace_back(s.micro, virtual_stage(stage, s.chunk, plan.pipeline.stages));
    const int total = static_cast<int>(fwd.size());
    int batch = -1;
    const auto open = [&] { batch = -1; };
    const auto id = [&] { return batch >= 0 ? batch : (batch = batches++); };
    const auto recv_input = [&](int k) {
      if (k < total && fwd[k].second > 0) receive(fwd[k].first, fwd[k].second - 1, EventKind::activation_sent, id());
    };
    const auto recv_grad = [&](int k) {
      if (k < total && bwd[k].second < vstages() - 1)
        receive(bwd[k].first, bwd[k].second + 1, EventKind::gradient_sent, id());
    };
    const auto send_output = [&](int k) {
      if (fwd[k].second < vstages() - 1) send(fwd[k].first, fwd[k].second, EventKind::activation_sent, id());
    };
    const auto send_grad = [&](int k) {
      if (bwd[k].second > 0) send(bwd[k].first, bwd[k].second, EventKind::gradient_sent, id());
    };
    open();
    recv_input(0);
    for (int k = 0; k < warmup; ++k) {
      forward_compute(fwd[k].first, fwd[k].second);
      open();
      send_output(k);
      recv_input(k + 1);
      if (k == warmup - 1 && warmup < total) recv_grad(0);
    }
    if (warmup == total) {  // every forward in the warm-up: the first backward's gradient on its own
      open();
      recv_grad(0);
    }
    for (int k = 0; k < total - warmup; ++k) {
      forward_compute(fwd[warmup + k].first, fwd[warmup + k].second);
      backward_compute(bwd[k].first, bwd[k].second);
      open();
      send_output(warmup + k);
      send_grad(k);
      if (k < total - warmup - 1) recv_input(warmup + k + 1);
      recv_grad(k + 1);
    }
    for (int k = total - warmup; k < total; ++k) {
      backward_compute(bwd[k].first, bwd[k].second);
      open();
      send_grad(k);
      recv_grad(k + 1);
    }
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
    if (last_reduced >= 0) bld.wait(compute, {EventKind::reduced, last_reduced});
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
    if (plan.sharded.sharding == Sharding::zero3)
      for (size_t u = 0; u < plan.sharded.units.size(); ++u)
        if (plan.sharded.units[u].stage == stage) {
          sb.units.push_back(static_cast<int>(u));
          sb.unit_opened_by_op[plan.sharded.units[u].ops.front()] = static_cast<int>(u);
        }
    sb.bld.rank.rank_class = fmt::format("pipeline stage {}", stage);
    sb.bld.rank.ranks = plan.world_size / pp.stages;
    sb.bld.rank.stage = stage;
    if (!program.classes.empty()) {  // a stage runs about as many instructions as the one before: grown once at most
      sb.bld.rank.instrs.reserve(program.classes.back().instrs.size());
      sb.bld.rank.comms.reserve(program.classes.back().comms.size());
    }
    sb.bld.mark(StepProgram::kCompute, Mark::step_begin, 0);
    sb.gather_units();
    if (pp.virtual_stages > 1) {
      sb.interleaved(slots[static_cast<size_t>(stage)],
                     pipeline_warmup_forwards(pp.schedule, pp.stages, pp.micro_batches, pp.virtual_stages, stage));
    } else {
      for (const PipelineSlot& slot : slots[static_cast<size_t>(stage)]) {
        const int vstage = virtual_stage(stage, slot.chunk, pp.stages);
        if (slot.forward)
          sb.forward(slot.micro, vstage);
        else
          sb.backward(slot.micro, vstage);
      }
    }
    sb.reduce_deferred();
    sb.optimizer();
    program.classes.push_back(std::move(sb.bld.rank));
  }
  return program;
}

}  // namespace dpsim::program_detail
