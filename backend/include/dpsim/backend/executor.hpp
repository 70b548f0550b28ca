#pragma once
// The backend's host side: an Executor receives the launches of one DDP training step, and the plan
// walker drives any Executor through a StepPlan exactly as PyTorch DDP does. The CUDA executor
// (backend/cuda) launches real kernels; the DryRunExecutor records the sequence for tests and
// `dpsim measure --dry-run`.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dpsim/p2p_batch.hpp"
#include "dpsim/plan.hpp"
#include "dpsim/program.hpp"

namespace dpsim::backend {

// compute, the data (or HSDP shard) group's collectives, and HSDP's all-reduces across replicas (FSDP's
// _all_reduce_stream): the step program's streams, in its order.
enum class Stream { compute, comm, all_reduce };
const char* to_string(Stream stream);

// Which product of a layer a GEMM call is. Row-major shapes, X [m,k], W [k,n], Y [m,n]:
//   forward          Y  = X W        (m, n, k)
//   backward_input   dX = dY W^T     (m, k, n)
//   backward_weight  dW = X^T dY     (k, n, m), written into the gradient's bucket slice
// Batched (attention) products use the same three roles with batch > 1 and no weights.
enum class GemmRole { forward, backward_input, backward_weight };
const char* to_string(GemmRole role);

struct GemmCall {
  int op = 0;    // index into StepPlan::ops
  int gemm = 0;  // index into PlanOp::gemms
  GemmRole role = GemmRole::forward;
  int64_t m = 0, n = 0, k = 0;  // of this product (already transposed per role)
  int64_t batch = 1;
  int grad = -1;            // backward_weight: the gradient written (index into StepPlan::grads), -1 scratch
  bool accumulate = false;  // beta = 1: gradient accumulation micro-steps after the first
  double flops() const {
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(batch);
  }
};

// Memory-bound work: norms, activations, the embedding's gather / scatter-add, the DDP copies.
enum class MemoryRole {
  forward,         // op's elementwise forward traffic (embedding: gather)
  backward,        // op's elementwise backward traffic
  grad_fill,       // writes a gradient that has no GEMM (norm weights, biases): reduction over tokens
  scatter_add,     // embedding backward: dense zero-fill of the gradient + scatter-add of token rows
  grad_divide,     // bucket views, synced micro-step: the gradient divided by the world size in its bucket slice
  grad_to_bucket,  // no bucket views: copy a gradient into its bucket slice, divided by the world size
  bucket_to_grad,  // no bucket views: copy the reduced bucket back after the last all-reduce
};
const char* to_string(MemoryRole role);

struct MemoryCall {
  int op = -1;  // -1 for bucket copies
  MemoryRole role = MemoryRole::forward;
  double bytes = 0;
  int grad = -1;  // grad_fill / scatter_add / grad_to_bucket: the gradient written
  int bucket = -1;
  bool accumulate = false;
  int divisor = 1;  // grad_divide / grad_to_bucket: DDP's division by the data group's size
};

// Events between the two streams: the step program's (core/include/dpsim/program.hpp), e.g. a bucket's gradients
// are all written (recorded on compute), a bucket's all-reduce is done (recorded on comm), an FSDP unit's weights
// are gathered. `bucket` is the event's index (a bucket for bucket events).
using EventKind = dpsim::EventKind;
struct EventRef {
  EventKind kind = EventKind::bucket_ready;
  int bucket = 0;
};

// Timing points: the step program's marks (core/include/dpsim/program.hpp).
using dpsim::Mark;

// What a pipeline stage's compute stream runs, span after span (Executor::stage_work): its step is their sum. The
// compute stream runs one thing at a time, so each span lasts until the next begins (the last until optimizer_end).
// Counted as the simulator counts a stage's step (StageTiming): forward, backward and optimizer compute; tensor: the
// blocking tensor-parallel collectives; p2p: the batches that send (a blocking send ends once its peer has received)
// and the tied embedding's all-reduce; neighbour_wait: the batches that only receive (waiting for a neighbouring
// stage, part of the bubble); own_comm_wait: waiting for the stage's own data-parallel collectives (exposed).
enum class StageWork { forward, backward, optimizer, tensor_comm, p2p, neighbour_wait, own_comm_wait };
const char* to_string(StageWork work);

// Where every gradient lives: buckets are contiguous slices of one flat buffer in bucket order,
// each gradient a slice of its bucket in ready order (gradient_as_bucket_view). Optimizer state
// and weights use the same flat order, so the fused optimizer is one kernel over everything.
struct GradSlot {
  int64_t flat_offset = 0;    // elements from the start of the flat gradient buffer
  int64_t bucket_offset = 0;  // elements from the start of its bucket
  int gemm = -1;              // the op's GEMM whose dW writes it; -1: written by a memory kernel
  bool held = true;           // false: another pipeline stage's gradient (a stage's layout), no slot
};

struct StepLayout {
  std::vector<GradSlot> grads;         // per StepPlan::grads
  std::vector<int64_t> bucket_offset;  // elements, per bucket
  std::vector<int64_t> bucket_numel;
  std::vector<std::vector<int>> gemm_grad;  // [op][gemm] -> grad written by its dW, -1 none
  int64_t total_numel = 0;
  int element_bytes = 2;
  bool bucket_view = true;  // gradient_as_bucket_view: dW lands straight in the bucket slice
};

// Match each op's gradients to its GEMMs (a weight of k*n elements, batch 1) and lay out buckets. With `stage` >= 0,
// pipeline stage `stage`'s layout: its buckets and gradients only (the other stages' buckets keep their indices with
// no elements, their gradients are not held).
StepLayout make_layout(const StepPlan& plan, int element_bytes, bool gradient_as_bucket_view, int stage = -1);

class Executor {
 public:
  virtual ~Executor() = default;
  virtual void gemm(const GemmCall& call) = 0;          // batch == 1
  virtual void batched_gemm(const GemmCall& call) = 0;  // batch > 1 (attention)
  virtual void memory_kernel(const MemoryCall& call) = 0;
  virtual void record_event(Stream stream, EventRef event) = 0;
  virtual void stream_wait(Stream waiter, EventRef event) = 0;
  virtual void allreduce_bucket(int bucket) = 0;  // on the comm stream
  // Any collective of the program, on `stream` (the program's), over a group of at least two ranks (the walker
  // issues nothing for a group of one: NCCL's one-rank in-place sum moves no data, and DDP's division already ran).
  // Default: a DDP bucket's all-reduce goes to allreduce_bucket; other kinds throw.
  virtual void collective(Stream stream, const CommCall& call);
  virtual void optimizer_step() = 0;  // on the compute stream
  virtual void mark(Stream stream, Mark mark, int index) = 0;
  // A pipeline stage's sends and receives posted together (one NCCL group), on `stream`: the step program's batch
  // number `batch` (Instr::batch). Default: throws (an executor that runs no pipeline).
  virtual void p2p_batch(Stream stream, const P2PBatch& batch, int number);
  // A pipeline stage's compute stream begins a span of `work` here (the walker calls it where the work changes, for a
  // stage's program only). Default: nothing (an executor that times no stages).
  virtual void stage_work(StageWork work);
};

// The pipeline stage whose program rank `rank` runs (WalkOptions::stage, make_layout's `stage`): its pipeline
// coordinate in the plan's process groups (groups.hpp coords_of); 0 without pipeline stages.
int rank_stage(const StepPlan& plan, int rank);

struct WalkOptions {
  int64_t gradient_accumulation = 1;  // k: k-1 no-sync micro-steps, then the synced one
  int stage = 0;                      // the pipeline stage whose program runs (0 without a pipeline)
};

// One training step of `plan` through `executor`: the step program (make_step_program, the order every
// executor runs) walked by walk_program, each instruction expanded into the kernels PyTorch DDP launches for it
// (an op's GEMMs and memory kernels, the division by the world size in or into the buckets, the collectives on
// the comm stream; none on a one-rank group). With pipeline stages, stage options.stage's program (layout: that
// stage's, make_layout's `stage`): each batch of its sends and receives (p2p_batches) is one p2p_batch where its
// first instruction stands; the records of what the sends deliver launch nothing (the receiving stage's batch
// receives it); a stage_work call precedes each span of the compute stream's work. Throws RuntimeError where the
// stages' batches could deadlock (p2p_deadlock).
void walk_step(const StepPlan& plan, const StepLayout& layout, const WalkOptions& options, Executor& executor);

// The step program of `plan` for `gradient_accumulation` micro-steps and its stages' send/receive batches, built and
// checked for deadlock once (RuntimeError as walk_step): a loop of steps, or a dry run of every stage, walks it again
// and again without rebuilding a deep pipeline's program each time.
struct PreparedStep {
  StepProgram program;
  std::vector<std::vector<P2PBatch>> batches;  // per rank class
};
PreparedStep prepare_step(const StepPlan& plan, int64_t gradient_accumulation);
void walk_step(const StepPlan& plan, const StepLayout& layout, const WalkOptions& options, const PreparedStep& step,
               Executor& executor);

// ---- the dry run ------------------------------------------------------------------------------

struct Launch {
  enum class Type {
    gemm,
    batched_gemm,
    memory,
    record,
    wait,
    allreduce,
    collective,
    optimizer,
    mark,
    send,
    recv,
    stage_work
  };
  Type type = Type::gemm;
  Stream stream = Stream::compute;
  GemmCall gemm_call{};
  MemoryCall memory_call{};
  EventRef event{};
  int bucket = -1;
  Mark mark_kind = Mark::step_begin;
  int index = 0;
  CommCall call{};                         // collective
  struct Spans {                           // collective, with a buffer plan: NCCL's send / recv
    int send_buffer = 0, recv_buffer = 0;  // backend::Buffer values (shard_buffers.hpp)
    int64_t send_offset = 0, recv_offset = 0, count = 0;
  };
  std::optional<Spans> buffers{};
  P2POp p2p{};                                       // send, recv: peer stage, bytes, what moves
  int batch = -1;                                    // send, recv: the program's batch number (one NCCL group)
  StageWork work = StageWork::forward;               // stage_work: the span that begins
  std::string describe(const StepPlan& plan) const;  // one line, as `measure --dry-run` prints it
};

struct ShardBuffers;

class DryRunExecutor final : public Executor {
 public:
  DryRunExecutor() = default;
  // With a buffer plan (plan_shard_buffers), each collective's launch records the buffers it reads and writes.
  explicit DryRunExecutor(const ShardBuffers* buffers) : buffers_(buffers) {}
  void gemm(const GemmCall& call) override;
  void batched_gemm(const GemmCall& call) override;
  void memory_kernel(const MemoryCall& call) override;
  void record_event(Stream stream, EventRef event) override;
  void stream_wait(Stream waiter, EventRef event) override;
  void allreduce_bucket(int bucket) override;
  void collective(Stream stream, const CommCall& call) override;
  void optimizer_step() override;
  void mark(Stream stream, Mark mark, int index) override;
  void p2p_batch(Stream stream, const P2PBatch& batch, int number) override;
  void stage_work(StageWork work) override;

  const std::vector<Launch>& launches() const { return launches_; }
  void clear() { launches_.clear(); }

 private:
  std::vector<Launch> launches_;
  const ShardBuffers* buffers_ = nullptr;
};

// The dry-run listing: a header, then one line per launch.
std::string describe_launches(const StepPlan& plan, const std::vector<Launch>& launches);

// `dpsim measure --dry-run`: each rank class's launches (with pipeline stages, every stage's: its own layout, buffers
// and program), each followed by the buffers of its first rank.
std::string describe_dry_run(const StepPlan& plan, int element_bytes, bool gradient_as_bucket_view);

}  // namespace dpsim::backend
