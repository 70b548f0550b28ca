// CudaExecutor: one GPU's real memory and kernels for the plan walker's launches.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "device.hpp"
#include "dpsim/backend/cuda.hpp"
#include "dpsim/backend/measure.hpp"
#include "dpsim/backend/shard_buffers.hpp"
#include "dpsim/error.hpp"
#include "dpsim/groups.hpp"
#include "dpsim/program.hpp"
#include "dpsim/sharding.hpp"

namespace dpsim::backend {

using namespace cuda;

struct CudaExecutor::Impl {
  StepPlan plan;
  StepLayout layout;
  CudaExecutorConfig cfg;
  Elem elem = Elem::bf16;
  int eb = 2;
  std::map<GroupKind, ncclComm_t> comms;  // blocking, split from the world communicator; owned here
  std::map<GroupKind, int> group_rank, group_size;
  std::unique_ptr<Watchdog> watchdog;
  cudaStream_t compute = nullptr, comm_stream = nullptr, all_reduce_stream = nullptr;  // all_reduce: HSDP's
  DeviceArena arena;
  std::unique_ptr<LtMatmul> lt;

  ShardBuffers buffers;              // what this rank holds and where each launch reads and writes (shard_buffers.hpp)
  std::vector<int64_t> unit_base;    // FSDP: where each unit's weights were last gathered in `weights` (gathered)
  void* weights = nullptr;           // Elem: flat weights (DDP, zero1, DeepSpeed); FSDP: the gathered units
  void* grads = nullptr;             // Elem: the DDP bucket buffers, bucket b at bucket_offset[b]; FSDP: a unit's grads
  void* weight_shard = nullptr;      // FSDP: the rank's 1/N of every unit's weights
  void* grad_shard = nullptr;        // FSDP: the rank's 1/N of every unit's gradients
  void* tensor_comm = nullptr;       // tensor parallelism: the buffer the tensor group's collectives run in
  void* p2p_recv = nullptr;          // pipeline: where a neighbouring stage's activations or gradients land
  std::map<int, int> pipeline_peer;  // pipeline: stage -> its rank at this rank's place in the pipeline group
  int stage = -1;                    // pipeline: the stage this rank runs; -1: no pipeline
  void* param_grads = nullptr;       // [total] Elem: param.grad when gradients are not bucket views
  float* master = nullptr;           // fp32, what the optimizer updates (nullptr when weights are fp32)
  float* m1 = nullptr;               // Adam first moment / SGD momentum
  float* m2 = nullptr;               // Adam second moment
  void* act = nullptr;               // activation arena
  void* buf_a = nullptr;             // dY and batched B operands (random)
  void* buf_c = nullptr;             // GEMM outputs, memory-kernel destination
  int64_t act_n = 0, buf_a_n = 0, buf_c_n = 0;
  Ring act_ring, a_ring, c_ring;               // the memory-bound kernels walk these
  std::vector<std::vector<int64_t>> x_offset;  // [op][gemm] -> element offset in act
  std::vector<int64_t> embed_width;            // [op] row width of the embedding gradient
  int step = 0;

  std::map<std::pair<int, int>, cudaEvent_t> events;           // the program's events (kind, index)
  std::map<std::tuple<int, int, int>, cudaEvent_t> call_done;  // (kind, group, index): what the watchdog watches
  std::map<std::pair<int, int>, cudaEvent_t> marks;
  std::vector<cudaEvent_t> span_events;  // pipeline: where each compute-stream span of the step began (stage_work)
  std::vector<StageWork> span_works;     // and what it runs; cleared at step_begin, the events reused

  Impl(const StepPlan& p, const StepLayout& l, const CudaExecutorConfig& c)
      : plan(p), layout(l), cfg(c), arena(c.device) {}

  cudaStream_t stream(Stream s) const {
    return s == Stream::compute ? compute : s == Stream::comm ? comm_stream : all_reduce_stream;
  }
  char* at(void* base, int64_t elems) const { return static_cast<char*>(base) + elems * eb; }
  void* base(Buffer b) const {
    switch (b) {
      case Buffer::weights:
      case Buffer::gathered: return weights;
      case Buffer::grads:
      case Buffer::unit_grads: return grads;
      case Buffer::weight_shard: return weight_shard;
      case Buffer::grad_shard: return grad_shard;
      case Buffer::tensor_comm: return tensor_comm;
      case Buffer::p2p_recv: return p2p_recv;
      case Buffer::none: break;
    }
    throw RuntimeError("CudaExecutor: a launch names no buffer");
  }
  char* ptr(const Span& span) const { return at(base(span.buffer), span.offset); }
  // param.grad: its bucket slice (bucket views) or its own buffer (DDP without), its unit's buffer (FSDP).
  void* grad_ptr(int g) const {
    if (!buffers.fsdp && !layout.bucket_view) return at(param_grads, layout.grads[g].flat_offset);
    return ptr(grad_span(buffers, layout, plan, g));
  }
  void* weight_ptr(int g) const { return ptr(weight_span(buffers, layout, plan, g, unit_base)); }
  template <typename Key>
  static cudaEvent_t event_in(std::map<Key, cudaEvent_t>& map, const Key& key, bool timing) {
    auto it = map.find(key);
    if (it != map.end()) return it->second;
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming), "cudaEventCreate");
    return map.emplace(key, e).first->second;
  }
  cudaEvent_t mark_event(Mark m, int index) {
    return event_in(marks, std::make_pair(static_cast<int>(m), index), true);
  }
  // bucket_ready is timed too (the result's ready_s).
  cudaEvent_t program_event(EventRef e) {
    return event_in(events, std::make_pair(static_cast<int>(e.kind), e.bucket), e.kind == EventKind::bucket_ready);
  }
  ncclComm_t comm_for(GroupKind g) const {
    if (watchdog && watchdog->aborted()) watchdog->wait_all();  // throws what the watchdog aborted for
    const auto it = comms.find(g);
    if (it == comms.end() || !it->second)
      throw RuntimeError(
          fmt::format("CudaExecutor: no NCCL communicator for the {} group (aborted, or a world of 1)", to_string(g)));
    return it->second;
  }
  double since(cudaEvent_t a, cudaEvent_t b) const {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    return ms * 1e-3;
  }
};

namespace {
struct DeviceGuard {
  int prev = 0;
  explicit DeviceGuard(int device) {
    cudaGetDevice(&prev);
    check(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceGuard() { cudaSetDevice(prev); }
};

// One blocking communicator per process group the program communicates over, split from the world communicator
// (colour: the group's index among the groups of its kind, key: the world rank). A world of 1 has none: the
// walker issues no collective on a group of one rank.
void split_group_comms(CudaExecutor::Impl& s, const StepProgram& program, const CudaExecutorConfig& cfg) {
  std::set<GroupKind> kinds;
  for (const RankProgram& r : program.classes)
    for (const CommCall& c : r.comms) kinds.insert(c.group);
  for (GroupKind kind : kinds) {
    const std::vector<ProcessGroup> groups = groups_of(kind, program.dims);
    const ProcessGroup mine = group_of(cfg.rank, kind, program.dims);
    const auto color = static_cast<int>(std::find(groups.begin(), groups.end(), mine) - groups.begin());
    s.group_size[kind] = static_cast<int>(mine.ranks.size());
    s.group_rank[kind] =
        static_cast<int>(std::find(mine.ranks.begin(), mine.ranks.end(), cfg.rank) - mine.ranks.begin());
    if (mine.ranks.size() < 2) continue;
    if (!cfg.nccl_comm)
      throw RuntimeError(fmt::format("CudaExecutor: no NCCL communicator for a world of {}", cfg.world));
    auto world = static_cast<ncclComm_t>(cfg.nccl_comm);
    s.comms[kind] =
        split_blocking(world, color, cfg.rank, cfg.watchdog_s,
                       fmt::format("NCCL communicator of the {} group on rank {}", to_string(kind), cfg.rank));
  }
}

// A pipeline stage's peers in the pipeline group's communicator (Megatron runs its point-to-point calls on the
// pipeline group; NCCL connects each pair of its ranks the first time they exchange): the rank at this rank's data
// and tensor place in each stage, by its position in the group.
std::map<int, int> pipeline_peers(const ParallelDims& dims, int rank) {
  std::map<int, int> peers;
  const ProcessGroup group = group_of(rank, GroupKind::pipeline, dims);
  RankCoords c = coords_of(rank, dims);
  for (int stage = 0; stage < dims.pipeline; ++stage) {
    c.pipeline = stage;
    const int world_rank = rank_of(c, dims);
    peers[stage] =
        static_cast<int>(std::find(group.ranks.begin(), group.ranks.end(), world_rank) - group.ranks.begin());
  }
  return peers;
}
}  // namespace

CudaExecutor::CudaExecutor(const StepPlan& plan, const StepLayout& layout, const CudaExecutorConfig& config)
    : impl_(std::make_unique<Impl>(plan, layout, config)) {
  Impl& s = *impl_;
  check(cudaSetDevice(config.device), "cudaSetDevice");
  s.elem = elem_of(config.dtype);
  s.eb = elem_bytes(s.elem);
  if (s.eb != layout.element_bytes)
    throw RuntimeError(
        fmt::format("layout element size {} B differs from the dtype's {} B", layout.element_bytes, s.eb));
  const StepProgram program = make_step_program(plan);
  split_group_comms(s, program, config);
  // With pipeline stages this rank runs its stage's program; `layout` must be the stage's (make_layout's `stage`).
  const int stage = rank_stage(plan, config.rank);
  if (program.classes.size() > 1) {
    s.stage = stage;
    s.pipeline_peer = pipeline_peers(program.dims, config.rank);
  }

  // Sizes: activation arena (the plan's figure, at least every GEMM's input), scratch buffers.
  int64_t max_x = 1, max_a = 1, max_c = 1;
  for (const PlanOp& op : plan.ops)
    for (const GemmShape& g : op.gemms) {
      max_x = std::max(max_x, g.m * g.k * g.batch);
      max_a = std::max({max_a, g.m * g.n * g.batch, g.k * g.n * g.batch});
      max_c = std::max({max_c, g.m * g.n * g.batch, g.m * g.k * g.batch, g.k * g.n * g.batch});
    }
  for (const Grad& g : plan.grads) max_a = std::max(max_a, std::min<int64_t>(g.numel, 1 << 24));
  s.act_n = std::max<int64_t>(max_x, static_cast<int64_t>(plan.memory.activation_bytes) / s.eb);
  s.buf_a_n = max_a;
  s.buf_c_n = std::max<int64_t>(max_c, 1 << 20);
  const int64_t total = std::max<int64_t>(layout.total_numel, 1);
  const bool need_master = s.elem != Elem::fp32;
  const int moments = config.optimizer == Optimizer::adamw ? 2 : config.optimizer == Optimizer::sgd_momentum ? 1 : 0;
  const size_t workspace = 32u << 20;

  // What the rank holds (shard_buffers.hpp): flat weights and gradients, or FSDP's shards, gathered units and their
  // unsharded gradients (one unit's, or every unit's of a pipeline stage); the optimizer state (fp32 master and
  // moments, core/sharding.cpp's table) of what it updates.
  const int shard_rank = s.group_rank.count(GroupKind::data) ? s.group_rank.at(GroupKind::data) : 0;
  const int tensor_rank = s.group_rank.count(GroupKind::tensor) ? s.group_rank.at(GroupKind::tensor) : 0;
  s.buffers = plan_shard_buffers(plan, program, layout, shard_rank, tensor_rank, stage);
  s.unit_base.assign(s.buffers.units.size(), 0);
  // Before any gather is issued (a world of 1 issues none): where each of this rank's units is first gathered.
  const RankProgram& own = program.classes.at(static_cast<size_t>(stage));  // rank_stage: 0 without stages
  for (size_t i = own.comms.size(); i-- > 0;)
    if (s.buffers.gathered_at.size() > i && s.buffers.gathered_at[i] >= 0)
      s.unit_base.at(static_cast<size_t>(own.comms[i].unit)) = s.buffers.gathered_at[i];
  // The backend's optimizer keeps an fp32 master and fp32 moments (measure refuses training.master_weights false).
  const ModelStateParts parts = model_state_parts(config.dtype, config.dtype, config.optimizer, true);
  const int64_t on = s.buffers.optimizer.numel;
  MemoryNeed need;
  need.model_state_bytes =
      static_cast<double>(s.buffers.numel_held() * s.eb) + static_cast<double>(on) * parts.optimizer;
  need.ddp_buffer_bytes = !s.buffers.fsdp && !layout.bucket_view ? static_cast<double>(total) * s.eb : 0.0;
  need.activation_bytes =
      static_cast<double>((s.act_n + s.buf_a_n + s.buf_c_n) * s.eb) + static_cast<double>(workspace);
  if (config.check_memory) {
    size_t free_b = 0, total_b = 0;
    check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    // cuBLAS/NCCL/context take some more: keep 1.5% of the card (at least 1 GB) in reserve.
    const double reserve = std::max(1e9, 0.015 * static_cast<double>(total_b));
    check_memory(need, device_name(config.device), static_cast<double>(free_b) - reserve);
  }

  check(cudaStreamCreateWithFlags(&s.compute, cudaStreamNonBlocking), "cudaStreamCreate (compute)");
  check(cudaStreamCreateWithFlags(&s.comm_stream, cudaStreamNonBlocking), "cudaStreamCreate (comm)");
  check(cudaStreamCreateWithFlags(&s.all_reduce_stream, cudaStreamNonBlocking), "cudaStreamCreate (all_reduce)");
  const ShardBuffers& b = s.buffers;
  if (b.fsdp) {
    s.weight_shard = s.arena.allocate(b.weight_shard_numel * s.eb, "weight shard");
    s.grad_shard = s.arena.allocate(b.grad_shard_numel * s.eb, "gradient shard");
    s.weights = s.arena.allocate(b.gathered_numel * s.eb, "gathered units' weights");
    s.grads = s.arena.allocate(b.unit_grads_numel * s.eb, "units' unsharded gradients");
  } else {
    s.weights = s.arena.allocate(b.weights_numel * s.eb, "weights");
    s.grads = s.arena.allocate(b.grads_numel * s.eb, "gradient buckets");
    if (!layout.bucket_view) s.param_grads = s.arena.allocate(total * s.eb, "parameter gradients (no bucket views)");
    if (b.grad_shard_numel > 0) s.grad_shard = s.arena.allocate(b.grad_shard_numel * s.eb, "gradient partition");
  }
  if (b.tensor_comm_numel > 0)
    s.tensor_comm = s.arena.allocate(b.tensor_comm_numel * s.eb, "tensor-parallel activations (operators f and g)");
  if (b.p2p_recv_numel > 0)
    s.p2p_recv = s.arena.allocate(b.p2p_recv_numel * s.eb, "activations and gradients received from pipeline stages");
  if (need_master) s.master = static_cast<float*>(s.arena.allocate(on * 4, "fp32 master weights"));
  if (moments >= 1) s.m1 = static_cast<float*>(s.arena.allocate(on * 4, "optimizer state (first moment)"));
  if (moments >= 2) s.m2 = static_cast<float*>(s.arena.allocate(on * 4, "optimizer state (second moment)"));
  s.act = s.arena.allocate(s.act_n * s.eb, "activations");
  s.buf_a = s.arena.allocate(s.buf_a_n * s.eb, "GEMM operand scratch");
  s.buf_c = s.arena.allocate(s.buf_c_n * s.eb, "GEMM output scratch");
  s.lt = std::make_unique<LtMatmul>(s.elem, workspace, s.arena, config.tf32);
  s.act_ring = {s.act, s.act_n, 0};
  s.a_ring = {s.buf_a, s.buf_a_n, 0};
  s.c_ring = {s.buf_c, s.buf_c_n, 0};

  // Random (never zero) contents; rank-dependent gradients so the all-reduce averages real data.
  const uint64_t seed = config.seed;
  const uint64_t rank_seed = 7919ull * static_cast<uint64_t>(config.rank);
  fill_random(s.elem, s.weights, b.fsdp ? b.gathered_numel : b.weights_numel, seed + 1, 0.02f, s.compute);
  if (s.weight_shard) fill_random(s.elem, s.weight_shard, b.weight_shard_numel, seed + 7 + rank_seed, 0.02f, s.compute);
  if (s.master) convert_to_f32(s.elem, s.ptr(b.optimizer), s.master, on, s.compute);
  fill_random(s.elem, s.grads, b.fsdp ? b.unit_grads_numel : b.grads_numel, seed + 2 + rank_seed, 0.01f, s.compute);
  if (s.grad_shard) fill_random(s.elem, s.grad_shard, b.grad_shard_numel, seed + 8 + rank_seed, 0.01f, s.compute);
  if (s.param_grads) fill_random(s.elem, s.param_grads, total, seed + 3, 0.01f, s.compute);
  if (s.m1) fill_zero(s.m1, on * 4, s.compute);
  if (s.m2) fill_zero(s.m2, on * 4, s.compute);
  fill_random(s.elem, s.act, s.act_n, seed + 4 + 104729ull * static_cast<uint64_t>(config.rank), 1.0f, s.compute);
  fill_random(s.elem, s.buf_a, s.buf_a_n, seed + 5 + 1299709ull * static_cast<uint64_t>(config.rank), 1.0f, s.compute);
  fill_random(s.elem, s.buf_c, s.buf_c_n, seed + 6, 1.0f, s.compute);

  // Each (op, GEMM) reads its own saved-activation slice, wrapping around the arena.
  int64_t cursor = 0;
  s.x_offset.resize(plan.ops.size());
  s.embed_width.assign(plan.ops.size(), 0);
  for (size_t o = 0; o < plan.ops.size(); ++o) {
    for (const GemmShape& g : plan.ops[o].gemms) {
      const int64_t n = g.m * g.k * g.batch;
      if (cursor + n > s.act_n) cursor = 0;
      s.x_offset[o].push_back(cursor);
      cursor += n;
    }
    if (plan.ops[o].kind == OpKind::embedding) {  // hidden width: k of the next op's first plain GEMM
      for (size_t q = o + 1; q < plan.ops.size() && s.embed_width[o] == 0; ++q)
        for (const GemmShape& g : plan.ops[q].gemms)
          if (g.batch == 1) {
            s.embed_width[o] = g.k;
            break;
          }
    }
  }

  std::vector<ncclComm_t*> watched;
  for (auto& [kind, comm] : s.comms) watched.push_back(&comm);
  s.watchdog = std::make_unique<Watchdog>(config.device, watched, config.watchdog_s, config.abort_flag);
  check(cudaStreamSynchronize(s.compute), "initialising GPU memory");
}

CudaExecutor::~CudaExecutor() {
  if (!impl_) return;
  Impl& s = *impl_;
  cudaSetDevice(s.cfg.device);
  const bool aborted = s.watchdog && s.watchdog->aborted();
  s.watchdog.reset();  // stops its thread before the events it watches go
  if (!aborted) {
    cudaStreamSynchronize(s.compute);
    cudaStreamSynchronize(s.comm_stream);
    cudaStreamSynchronize(s.all_reduce_stream);
  }
  for (auto& [k, comm] : s.comms) destroy_comm(comm);
  for (auto& [k, e] : s.events) cudaEventDestroy(e);
  for (auto& [k, e] : s.call_done) cudaEventDestroy(e);
  for (auto& [k, e] : s.marks) cudaEventDestroy(e);
  for (cudaEvent_t e : s.span_events) cudaEventDestroy(e);
  s.lt.reset();
  if (s.compute) cudaStreamDestroy(s.compute);
  if (s.comm_stream) cudaStreamDestroy(s.comm_stream);
  if (s.all_reduce_stream) cudaStreamDestroy(s.all_reduce_stream);
}

double CudaExecutor::allocated_bytes() const { return impl_->arena.allocated_bytes(); }

void CudaExecutor::gemm(const GemmCall& c) {
  Impl& s = *impl_;
  const int64_t x_off = s.x_offset.at(static_cast<size_t>(c.op)).at(static_cast<size_t>(c.gemm));
  const int g = s.layout.gemm_grad.at(static_cast<size_t>(c.op)).at(static_cast<size_t>(c.gemm));
  GemmOperands o;
  o.x = s.at(s.act, x_off);
  o.weight = g >= 0 ? static_cast<const void*>(s.weight_ptr(g)) : s.buf_a;
  o.dy = s.buf_a;
  o.out = c.role == GemmRole::backward_weight && c.grad >= 0 ? s.grad_ptr(c.grad) : s.buf_c;
  s.lt->run(step_matmul(c, o), s.compute);
}

void CudaExecutor::batched_gemm(const GemmCall& c) {
  Impl& s = *impl_;
  GemmOperands o;
  o.x = s.at(s.act, s.x_offset.at(static_cast<size_t>(c.op)).at(static_cast<size_t>(c.gemm)));
  o.weight = s.buf_a;
  o.dy = s.buf_a;
  o.out = s.buf_c;
  s.lt->run(step_matmul(c, o), s.compute);
}

void CudaExecutor::memory_kernel(const MemoryCall& c) {
  Impl& s = *impl_;
  const int64_t n = static_cast<int64_t>(c.bytes / 2.0 / s.eb);  // half read, half written
  switch (c.role) {
    case MemoryRole::forward: stream_rw(s.elem, s.act_ring, s.c_ring, n, s.compute); break;
    case MemoryRole::backward: stream_rw(s.elem, s.a_ring, s.c_ring, n, s.compute); break;
    case MemoryRole::grad_divide: {  // gradients are bucket views: bucket_view.div_(world)
      const int64_t numel = s.plan.grads.at(static_cast<size_t>(c.grad)).numel;
      scale(s.elem, s.grad_ptr(c.grad), numel, 1.0f / static_cast<float>(c.divisor), s.compute);
      break;
    }
    case MemoryRole::grad_fill: {
      const int64_t numel = s.plan.grads.at(static_cast<size_t>(c.grad)).numel;
      grad_fill(s.elem, s.grad_ptr(c.grad), numel, s.buf_a, s.buf_a_n, s.act, s.act_n, c.accumulate, s.compute);
      break;
    }
    case MemoryRole::scatter_add: {
      const int64_t numel = s.plan.grads.at(static_cast<size_t>(c.grad)).numel;
      int64_t width = s.embed_width.at(static_cast<size_t>(c.op));
      if (width <= 0 || numel % width != 0) width = numel;
      const int64_t tokens = s.plan.micro_batch * s.plan.sequence_length;
      embedding_scatter_add(s.elem, s.grad_ptr(c.grad), numel / width, width, s.buf_a, s.buf_a_n, tokens,
                            s.cfg.seed + 77 + static_cast<uint64_t>(s.step), c.accumulate, s.compute);
      break;
    }
    case MemoryRole::grad_to_bucket: {
      const auto& slot = s.layout.grads.at(static_cast<size_t>(c.grad));
      // at::mul_out(bucket_view, grad, 1/world): divided while copied
      copy_scaled(s.elem, s.at(s.grads, slot.flat_offset), s.at(s.param_grads, slot.flat_offset),
                  s.plan.grads[c.grad].numel, 1.0f / static_cast<float>(c.divisor), s.compute);
      break;
    }
    case MemoryRole::bucket_to_grad: {
      const auto b = static_cast<size_t>(c.bucket);
      copy(s.at(s.param_grads, s.layout.bucket_offset[b]), s.at(s.grads, s.layout.bucket_offset[b]),
           s.layout.bucket_numel[b] * s.eb, s.compute);
      break;
    }
  }
}

void CudaExecutor::record_event(Stream stream, EventRef e) {
  Impl& s = *impl_;
  check(cudaEventRecord(s.program_event(e), s.stream(stream)), "cudaEventRecord (program event)");
}

void CudaExecutor::stream_wait(Stream waiter, EventRef e) {
  Impl& s = *impl_;
  check(cudaStreamWaitEvent(s.stream(waiter), s.program_event(e), 0), "cudaStreamWaitEvent");
}

void CudaExecutor::allreduce_bucket(int bucket) {
  collective(Stream::comm, {.kind = CollectiveKind::all_reduce,
                            .group = GroupKind::data,
                            .index = bucket,
                            .bytes = static_cast<double>(impl_->plan.buckets.at(static_cast<size_t>(bucket)).bytes),
                            .bucket = bucket});
}

// Every collective kind of the step program on its group's communicator, in the buffers the buffer plan gives it,
// on the program's stream (shard_buffers.hpp): a DDP bucket reduced in place with ncclSum (the gradients were divided
// by the world size while written into it, as DDP does), zero1's reduce-scatter into the rank's slice of its bucket
// and its all-gathers in place in the weights; FSDP's all-gathers from the weight shard into the unit's gathered
// buffer and its reduce-scatters (ncclAvg, as FSDP2 issues them) from the unit's gradients into the gradient
// shard; the tensor group's (Megatron's f and g) summed in place in the tensor-comm buffer. Returns once enqueued; the
// watchdog thread watches it.
void CudaExecutor::collective(Stream on, const CommCall& c) {
  Impl& s = *impl_;
  cudaStream_t const stream = s.stream(on);
  const ncclComm_t comm = s.comm_for(c.group);
  const CallBuffers& b = s.buffers.call(c);
  void* send = s.ptr(b.send);
  void* recv = s.ptr(b.recv);
  const auto count = static_cast<size_t>(b.count);
  const ncclDataType_t t = nccl_type(s.elem);
  const std::string what = fmt::format(
      "{} #{} over the {} group ({:.1f} MB{}) on rank {} (GPU {})", to_string(c.kind), c.index, to_string(c.group),
      c.bytes / 1e6, c.bucket >= 0 ? fmt::format(", bucket {}", c.bucket) : std::string(), s.cfg.rank, s.cfg.device);
  ncclResult_t res = ncclSuccess;
  switch (c.kind) {
    case CollectiveKind::all_reduce: res = ncclAllReduce(send, recv, count, t, ncclSum, comm, stream); break;
    case CollectiveKind::reduce_scatter:
      res = ncclReduceScatter(send, recv, count, t, c.bucket >= 0 || c.group == GroupKind::tensor ? ncclSum : ncclAvg,
                              comm, stream);
      break;
    case CollectiveKind::all_gather:
      res = ncclAllGather(send, recv, count, t, comm, stream);
      if (c.unit >= 0) s.unit_base.at(static_cast<size_t>(c.unit)) = b.recv.offset;  // its compute reads it there
      break;
    case CollectiveKind::broadcast:
    case CollectiveKind::send:
    case CollectiveKind::recv:
      throw RuntimeError(fmt::format(
          "the GPU backend runs no {} outside a point-to-point batch (a pipeline's sends and receives are p2p_batch's)",
          to_string(c.kind)));
  }
  check(res, what.c_str());
  cudaEvent_t done =
      Impl::event_in(s.call_done, std::make_tuple(static_cast<int>(c.kind), static_cast<int>(c.group), c.index), false);
  check(cudaEventRecord(done, stream), "cudaEventRecord (collective)");
  s.watchdog->watch(done, what);
}

// One batch of a pipeline stage's sends and receives as one NCCL group on the pipeline group's communicator (Megatron's
// batch_isend_irecv), on the program's stream: sends read tensor-comm, receives land in p2p-recv (the buffer plan's).
// Returns once enqueued; the watchdog watches the group's end.
void CudaExecutor::p2p_batch(Stream on, const P2PBatch& batch, int number) {
  Impl& s = *impl_;
  cudaStream_t const stream = s.stream(on);
  const ncclComm_t comm = s.comm_for(GroupKind::pipeline);
  const ncclDataType_t t = nccl_type(s.elem);
  const std::string what = fmt::format(
      "pipeline batch {} ({} sends and receives, first {} stage {}) on rank {} (GPU {})", number, batch.ops.size(),
      to_string(batch.ops.front().type), batch.ops.front().peer, s.cfg.rank, s.cfg.device);
  check(ncclGroupStart(), "ncclGroupStart");
  ncclResult_t res = ncclSuccess;
  for (const P2POp& op : batch.ops) {
    const CallBuffers b = s.buffers.p2p(op);
    const int peer = s.pipeline_peer.at(op.peer);
    const auto count = static_cast<size_t>(b.count);
    if (res != ncclSuccess) break;
    if (op.type == P2POp::Type::send)
      res = ncclSend(s.ptr(b.send), count, t, peer, comm, stream);
    else if (op.type == P2POp::Type::recv)
      res = ncclRecv(s.ptr(b.recv), count, t, peer, comm, stream);
    else
      res = ncclInvalidUsage;  // the tied embedding's all-reduce is a collective of its own
  }
  const ncclResult_t ended = ncclGroupEnd();
  check(res != ncclSuccess ? res : ended, what.c_str());
  cudaEvent_t done = Impl::event_in(
      s.call_done,
      std::make_tuple(static_cast<int>(CollectiveKind::send), static_cast<int>(GroupKind::pipeline), number), false);
  check(cudaEventRecord(done, stream), "cudaEventRecord (pipeline batch)");
  s.watchdog->watch(done, what);
}

void CudaExecutor::optimizer_step() {
  Impl& s = *impl_;
  ++s.step;
  // What the rank updates (shard_buffers.hpp): the flat order's slice (all of it unsharded) or the weight shard.
  const Span& ws = s.buffers.optimizer;
  const Span& gs = s.buffers.optimizer_grads;
  const int64_t n = ws.numel;
  void* w = s.ptr(ws);
  const void* g = !s.buffers.fsdp && !s.layout.bucket_view ? s.at(s.param_grads, gs.offset) : s.ptr(gs);
  switch (s.cfg.optimizer) {
    case Optimizer::adamw: adamw_step(s.elem, w, g, s.master, s.m1, s.m2, n, s.step, AdamW{}, s.compute); break;
    case Optimizer::sgd_momentum: sgd_step(s.elem, w, g, s.master, s.m1, n, 1e-3f, 0.9f, 0.0f, s.compute); break;
    case Optimizer::sgd: sgd_step(s.elem, w, g, s.master, nullptr, n, 1e-3f, 0.0f, 0.0f, s.compute); break;
  }
}

void CudaExecutor::mark(Stream stream, Mark m, int index) {
  Impl& s = *impl_;
  if (m == Mark::step_begin) s.span_works.clear();
  check(cudaEventRecord(s.mark_event(m, index), s.stream(stream)), "cudaEventRecord (timing)");
}

// A span of a pipeline stage's compute stream begins: a timing event where it stands (finish_step sums the spans).
void CudaExecutor::stage_work(StageWork work) {
  Impl& s = *impl_;
  const size_t i = s.span_works.size();
  if (i == s.span_events.size()) {
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, cudaEventDefault), "cudaEventCreate (stage work)");
    s.span_events.push_back(e);
  }
  check(cudaEventRecord(s.span_events[i], s.compute), "cudaEventRecord (stage work)");
  s.span_works.push_back(work);
}

namespace {
// Bucket b's ready, start and end from step begin; a pipeline stage's rank reduces its own buckets only (0 others).
BucketSample bucket_sample(CudaExecutor::Impl& s, size_t b) {
  if (s.stage >= 0 && s.plan.buckets[b].stage != s.stage) return {};
  cudaEvent_t begin = s.mark_event(Mark::step_begin, 0);
  BucketSample bs;
  bs.ready_s = s.since(begin, s.program_event({EventKind::bucket_ready, static_cast<int>(b)}));
  bs.start_s = s.since(begin, s.mark_event(Mark::bucket_start, static_cast<int>(b)));
  bs.end_s = s.since(begin, s.mark_event(Mark::bucket_end, static_cast<int>(b)));
  return bs;
}
}  // namespace

StepSample CudaExecutor::finish_step() {
  Impl& s = *impl_;
  s.watchdog->wait_all();  // every collective of the step done, or the watchdog's message
  check(cudaStreamSynchronize(s.compute), "training step (compute stream)");

  StepSample out;
  cudaEvent_t begin = s.mark_event(Mark::step_begin, 0);
  out.step_s = s.since(begin, s.mark_event(Mark::optimizer_end, 0));
  if (s.stage >= 0) {  // a stage's program marks no micro-steps: its compute stream's spans say where the step went
    out.stage = s.stage;
    out.optimizer_begin_s = s.since(begin, s.mark_event(Mark::optimizer_begin, 0));
    std::vector<double> begins;
    for (size_t i = 0; i < s.span_works.size(); ++i) begins.push_back(s.since(begin, s.span_events[i]));
    add_stage_spans(s.span_works, begins, out.step_s, out);
    for (size_t b = 0; b < s.plan.buckets.size(); ++b) out.buckets.push_back(bucket_sample(s, b));
    return out;
  }
  out.optimizer_s = s.since(s.mark_event(Mark::optimizer_begin, 0), s.mark_event(Mark::optimizer_end, 0));
  out.optimizer_begin_s = s.since(begin, s.mark_event(Mark::optimizer_begin, 0));
  const int micro = static_cast<int>(std::max<int64_t>(1, s.plan.gradient_accumulation));
  for (int i = 0; i < micro; ++i) {
    out.forward_s += s.since(s.mark_event(Mark::forward_begin, i), s.mark_event(Mark::forward_end, i));
    out.backward_s += s.since(s.mark_event(Mark::forward_end, i), s.mark_event(Mark::backward_end, i));
  }
  out.backward_end_s = s.since(begin, s.mark_event(Mark::backward_end, micro - 1));
  for (size_t b = 0; b < s.plan.buckets.size(); ++b) out.buckets.push_back(bucket_sample(s, b));
  return out;
}

double CudaExecutor::time_single_allreduce(int reps) {
  Impl& s = *impl_;
  if (!s.comms.count(GroupKind::data)) return 0;  // a world of 1
  // All the gradients as one message needs a buffer that holds them: FSDP's zero3 rank holds none (0: not timed).
  void* all = s.buffers.grads_numel >= s.layout.total_numel      ? s.grads
              : s.buffers.weights_numel >= s.layout.total_numel  ? s.weights
              : s.buffers.gathered_numel >= s.layout.total_numel ? s.weights
                                                                 : nullptr;
  if (!all) return 0;
  const ncclComm_t comm = s.comm_for(GroupKind::data);
  cudaEvent_t a = nullptr, b = nullptr;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    check(cudaEventRecord(a, s.comm_stream), "cudaEventRecord");
    check(ncclAllReduce(all, all, static_cast<size_t>(s.layout.total_numel), nccl_type(s.elem), ncclSum, comm,
                        s.comm_stream),
          "ncclAllReduce (all gradients)");
    check(cudaEventRecord(b, s.comm_stream), "cudaEventRecord");
    s.watchdog->watch(b, fmt::format("all-reduce of all gradients on rank {}", s.cfg.rank));
    s.watchdog->wait_all();
    t.push_back(s.since(a, b));
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return percentile(t, 0.5);
}

double CudaExecutor::time_gemm(const GemmCall& call, int reps) {
  Impl& s = *impl_;
  cudaEvent_t a = nullptr, b = nullptr;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  std::vector<double> t;
  for (int i = 0; i < reps + 2; ++i) {
    check(cudaEventRecord(a, s.compute), "cudaEventRecord");
    if (call.batch > 1)
      batched_gemm(call);
    else
      gemm(call);
    check(cudaEventRecord(b, s.compute), "cudaEventRecord");
    check(cudaEventSynchronize(b), "cudaEventSynchronize");
    if (i >= 2) t.push_back(s.since(a, b));
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return percentile(t, 0.5);
}

// ---- test hooks -------------------------------------------------------------------------------

namespace {
float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu, bits = 0;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {
      exp = 127 - 15 + 1;
      while (!(mant & 0x400u)) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3FFu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::vector<float> download(const void* p, int64_t n, Elem e) {
  std::vector<float> out(static_cast<size_t>(n));
  if (e == Elem::fp32) {
    check(cudaMemcpy(out.data(), p, static_cast<size_t>(n) * 4, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
    return out;
  }
  std::vector<uint16_t> raw(static_cast<size_t>(n));
  check(cudaMemcpy(raw.data(), p, static_cast<size_t>(n) * 2, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  for (size_t i = 0; i < raw.size(); ++i) {
    if (e == Elem::bf16) {
      const uint32_t bits = static_cast<uint32_t>(raw[i]) << 16;
      std::memcpy(&out[i], &bits, 4);
    } else {
      out[i] = half_to_float(raw[i]);
    }
  }
  return out;
}
}  // namespace

void CudaExecutor::synchronize() const {
  check(cudaSetDevice(impl_->cfg.device), "cudaSetDevice");
  check(cudaStreamSynchronize(impl_->compute), "synchronize compute");
  check(cudaStreamSynchronize(impl_->comm_stream), "synchronize comm");
  check(cudaStreamSynchronize(impl_->all_reduce_stream), "synchronize all_reduce");
}

std::vector<float> CudaExecutor::grad(int g) const {
  const Impl& s = *impl_;
  synchronize();
  return download(s.ptr(grad_span(s.buffers, s.layout, s.plan, g)), s.plan.grads[g].numel, s.elem);
}

std::vector<float> CudaExecutor::weights(int g) const {
  const Impl& s = *impl_;
  synchronize();
  return download(s.weight_ptr(g), s.plan.grads[g].numel, s.elem);
}

std::vector<float> CudaExecutor::master(int g) const {
  const Impl& s = *impl_;
  synchronize();
  const int64_t off = s.layout.grads.at(static_cast<size_t>(g)).flat_offset;
  if (!s.master) return weights(g);
  const Span& opt = s.buffers.optimizer;
  if (s.buffers.fsdp || off < opt.offset || off + s.plan.grads[g].numel > opt.offset + opt.numel)
    throw RuntimeError("CudaExecutor::master: the gradient's weights are outside this rank's optimizer slice");
  return download(s.master + (off - opt.offset), s.plan.grads[g].numel, Elem::fp32);
}

std::vector<float> CudaExecutor::gemm_input(int op, int gemm) const {
  const Impl& s = *impl_;
  synchronize();
  const GemmShape& g = s.plan.ops.at(static_cast<size_t>(op)).gemms.at(static_cast<size_t>(gemm));
  return download(s.at(s.act, s.x_offset[op][gemm]), g.m * g.k * g.batch, s.elem);
}

std::vector<float> CudaExecutor::gemm_grad_output() const {
  const Impl& s = *impl_;
  synchronize();
  return download(s.buf_a, s.buf_a_n, s.elem);
}

std::vector<float> CudaExecutor::gemm_output(int64_t count) const {
  const Impl& s = *impl_;
  synchronize();
  return download(s.buf_c, std::min(count, s.buf_c_n), s.elem);
}

}  // namespace dpsim::backend
