#pragma once
// StepProgram: one training step as a rank runs it, compute ops and communication calls on named streams with
// the events between them. Written once (make_step_program) and executed by one walker (walk_program) through a
// StepExecutor, implemented by the simulator (sim/), the GPU backend and its dry run (backend/) and the closed-form
// estimate (AnalyticExecutor, core). DDP is one instance: buckets are all-reduces over the data group on one comm
// stream, launched in order as the backward completes them.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "dpsim/collective_kind.hpp"
#include "dpsim/compute_cost.hpp"
#include "dpsim/groups.hpp"
#include "dpsim/overlap.hpp"
#include "dpsim/plan.hpp"

namespace dpsim {

// Timing points, each recorded on one stream at its position in the stream's order.
enum class Mark {
  step_begin,       // compute
  forward_begin,    // compute, per micro-step
  forward_end,      // compute, per micro-step (= backward begin)
  backward_end,     // compute, per micro-step
  bucket_start,     // comm, per DDP bucket: the all-reduce begins (after its wait)
  bucket_end,       // comm, per DDP bucket
  optimizer_begin,  // compute, after the wait for the last bucket, before the copy back (optimizer time)
  optimizer_end,    // compute (= step end)
};
const char* to_string(Mark mark);

// Events between streams: recorded on one stream, waited for on another.
enum class EventKind {
  none,            // no event: the input is ready when the call is issued (a blocking call on the compute stream)
  bucket_ready,    // compute: a bucket's gradients are all written
  bucket_done,     // comm: a bucket's all-reduce (zero1: reduce-scatter) is done
  backward_done,   // compute: the synced micro-step's backward is done (no-overlap schedules wait for it)
  gathered,        // comm: an all-gather is done (index: the all-gather's call index)
  unit_forward,    // compute: an FSDP unit's forward is done (index: micro x units + unit)
  unit_backward,   // compute: an FSDP unit's backward is done, its gradients written (same index)
  reduced,         // comm: an FSDP unit's reduce-scatter is done (index: the unit)
  all_reduced,     // all_reduce (HSDP): a unit's gradient shard is all-reduced across the replicas (index: the unit)
  optimizer_done,  // compute: the sharded optimizer step is done (zero1 gathers the updated weights after it)
  // Pipeline parallelism, recorded by one stage's rank class and waited for by the next or previous stage's (index:
  // micro-batch x virtual stages + the sending virtual stage):
  activation_sent,  // compute: the virtual stage's output activations are sent to the next one
  gradient_sent,    // compute: the virtual stage's input gradient is sent back to the previous one
};
// Whether an event crosses rank classes (a pipeline stage's send, another stage's wait).
inline bool crosses_classes(EventKind kind) {
  return kind == EventKind::activation_sent || kind == EventKind::gradient_sent;
}
const char* to_string(EventKind kind);
struct EventRef {
  EventKind kind = EventKind::none;
  int index = 0;
  bool operator==(const EventRef&) const = default;
};

// A value per event (when it was recorded, who waits for it), found by its (kind, index) in constant time: a
// pipeline's program records and waits for hundreds of thousands of them.
template <class T>
class EventMap {
 public:
  T& operator[](EventRef e) { return map_[key(e)]; }
  bool contains(EventRef e) const { return map_.count(key(e)) > 0; }
  const T* find(EventRef e) const {
    const auto it = map_.find(key(e));
    return it == map_.end() ? nullptr : &it->second;
  }
  T* find(EventRef e) {
    const auto it = map_.find(key(e));
    return it == map_.end() ? nullptr : &it->second;
  }
  const T& at(EventRef e) const { return map_.at(key(e)); }  // std::out_of_range where it was never set
  T& at(EventRef e) { return map_.at(key(e)); }

 private:
  static uint64_t key(EventRef e) {
    return static_cast<uint64_t>(static_cast<uint32_t>(e.kind)) << 32 | static_cast<uint32_t>(e.index);
  }
  std::unordered_map<uint64_t, T> map_;
};

struct CommCall {
  CollectiveKind kind = CollectiveKind::all_reduce;
  GroupKind group = GroupKind::data;
  int index = 0;            // per (kind, group), in issue order: what validate matches measured and predicted by
  double bytes = 0;         // the buffer size S as nccl-tests prints it
  int bucket = -1;          // the DDP bucket reduced (index into StepPlan::buckets); -1: none
  int unit = -1;            // the FSDP unit gathered or reduced (index into StepPlan::sharded.units); -1: none
  EventRef inputs_ready{};  // the event that says its input is complete (its ready_s in results)
  bool backward = false;    // a blocking call on the compute stream (tensor, pipeline) in the backward phase
  int peer = -1;            // a pipeline send: the stage it sends to; -1: none
  EventRef delivers{};      // a pipeline send: the cross-class event the receiving stage waits for (what it carries)
  // parallelism.tp_comm_overlap: a tensor-parallel call that runs beside a GEMM of op `overlap_op` (its forward, or
  // half of its backward: the input or the weight gradient), how (overlap.hpp: Transformer Engine's methods, or
  // Megatron-Core's asynchronous backward call)
  TpOverlap tp_overlap = TpOverlap::none;
  int overlap_op = -1;
  bool overlap_backward = false;
  // The part of op `overlap_op`'s forward or backward that runs beside it; 0: a tensor-parallel call's (all of the
  // forward, half of the backward). A context-parallel ring step runs beside one of the attention's `context` steps.
  double overlap_share = 0;
};

// How long a tensor- or context-parallel call blocks the compute stream: all of `comm_s`, or with
// parallelism.tp_comm_overlap what the GEMM beside it leaves exposed (tp_overlap_exposed_s): the op's forward, or half
// of its backward (the input or the weight gradient, whose FLOPs are equal), from `op_s`; a context-parallel ring
// step, what its share of the attention leaves exposed (overlap_share). Both executors (sim/, core/analytic.cpp) ask
// this.
double blocking_call_s(const CommCall& call, double comm_s, const OpSeconds& op_s, int tensor, int sm_count,
                       const NcclModel& nccl);

// Pipeline parallelism's calls between stages: the sends to a neighbouring stage and the tied embedding's all-reduce
// between the first and the last. Each is timed by NCCL's model over its pair's fabric (no flows laid) and counted as
// the stage's p2p time (step.p2p_s).
inline bool between_stages(const CommCall& c) {
  return (c.kind == CollectiveKind::send && c.group == GroupKind::pipeline) || c.group == GroupKind::embedding;
}

// Which phase of the step a compute instruction's time counts towards.
enum class Phase { forward, backward, optimizer };

struct Instr {
  enum class Type { forward, backward, collective, record, wait, unflatten, optimizer, mark };
  Type type = Type::forward;
  int stream = 0;     // index into StepProgram::streams
  int op = -1;        // forward / backward: index into StepPlan::ops
  int micro = 0;      // forward / backward: the micro-step
  bool sync = false;  // backward: the micro-step whose gradients are reduced (DDP: outside no_sync())
  int comm = -1;      // collective: index into RankProgram::comms
  EventRef event{};   // record / wait
  Mark mark = Mark::step_begin;
  int mark_index = 0;  // mark: micro-step or bucket
  // A pipeline's point-to-point instructions (a send's collective, a receive's wait for a cross-class event): the
  // batch, numbered per rank class in issue order, whose sends and receives are posted together (one NCCL group,
  // Megatron's batch_isend_irecv; p2p_batch.hpp). -1: none. A batch's instructions are consecutive but for the
  // records of the events its sends deliver.
  int batch = -1;
  Phase phase() const;
};
const char* to_string(Instr::Type type);

struct RankProgram {
  std::string rank_class;  // which ranks run it, in words ("every rank" for data parallelism)
  int ranks = 1;           // how many ranks run it
  int stage = -1;          // the pipeline stage it runs (its ops, buckets, optimizer); -1: no pipeline
  std::vector<CommCall> comms;
  std::vector<Instr> instrs;  // issue order: one host thread can issue them so (every wait after its record)
};

struct StepProgram {
  std::vector<std::string> streams;  // index 0 is the compute stream
  ParallelDims dims;
  std::vector<RankProgram> classes;  // one per distinct rank class
  int micro_steps = 1;
  static constexpr int kCompute = 0;
  static constexpr int kComm = 1;
  static constexpr int kAllReduce = 2;  // HSDP: FSDP's _all_reduce_stream, the replica group's all-reduces
};

struct ProgramOptions {
  int64_t micro_steps = 0;  // 0: the plan's gradient_accumulation
  bool overlap = true;      // false: communication starts only after the whole backward (predict --no-overlap)
};

// The step of `plan`: data parallelism over all of its ranks, DDP or sharded (plan.sharded). DDP and zero1 reduce
// the DDP buckets on the comm stream (zero1: reduce-scatter, then the sharded update, then an all-gather of the
// updated weights per bucket); zero2/zero3 run FSDP's order on the data group's one NCCL stream (ProcessGroupNCCL
// runs a group's collectives on one stream, in issue order). Throws RuntimeError for an inconsistent plan
// (buckets that complete out of order or never).
StepProgram make_step_program(const StepPlan& plan, const ProgramOptions& options = {});

// What executes a program: each call is one instruction, in issue order.
class StepExecutor {
 public:
  virtual ~StepExecutor() = default;
  virtual void forward(const Instr& instr) = 0;
  virtual void backward(const Instr& instr) = 0;
  virtual void collective(const Instr& instr, const CommCall& call) = 0;
  virtual void record(const Instr& instr) = 0;
  virtual void wait(const Instr& instr) = 0;
  virtual void unflatten(const Instr& instr) = 0;  // copy reduced buckets back into the gradients
  virtual void optimizer(const Instr& instr) = 0;
  virtual void mark(const Instr& instr) = 0;
};

// One line per instruction ("comm collective all_reduce data #3 bucket 3"): the program's listing, and what tests
// compare to check that two executors ran the same program.
std::string describe(const Instr& instr, const StepProgram& program, const RankProgram& rank);

// Runs `rank` of `program` through `executor`, instruction by instruction in issue order. Throws RuntimeError
// for a program no executor could run (a wait before its record, an index out of range).
void walk_program(const StepProgram& program, const RankProgram& rank, StepExecutor& executor);

// Runs every rank class of `program` through its executor (executors[c] for classes[c]), interleaved: a class stops
// at a wait for a cross-class event (crosses_classes) that no class has recorded yet and goes on once one has, so an
// executor that needs its events in time order (the closed form) gets them so. Throws RuntimeError on a deadlock.
void walk_classes(const StepProgram& program, const std::vector<StepExecutor*>& executors);

}  // namespace dpsim
