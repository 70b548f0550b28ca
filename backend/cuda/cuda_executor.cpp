// CudaExecutor: one GPU's real memory and kernels for the plan walker's launches.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "device.hpp"
#include "dpsim/backend/cuda.hpp"
#include "dpsim/backend/measure.hpp"
#include "dpsim/error.hpp"

namespace dpsim::backend {

using namespace cuda;

struct CudaExecutor::Impl {
  StepPlan plan;
  StepLayout layout;
  CudaExecutorConfig cfg;
  Elem elem = Elem::bf16;
  int eb = 2;
  ncclComm_t comm = nullptr;
  cudaStream_t compute = nullptr, comm_stream = nullptr;
  DeviceArena arena;
  std::unique_ptr<LtMatmul> lt;

  void* weights = nullptr;      // [total] Elem, flat gradient order
  void* grads = nullptr;        // [total] Elem: the DDP bucket buffers, bucket b at bucket_offset[b]
  void* param_grads = nullptr;  // [total] Elem: param.grad when gradients are not bucket views
  float* master = nullptr;      // [total] fp32 (nullptr when weights are fp32)
  float* m1 = nullptr;          // Adam first moment / SGD momentum
  float* m2 = nullptr;          // Adam second moment
  void* act = nullptr;          // activation arena
  void* buf_a = nullptr;        // dY and batched B operands (random)
  void* buf_c = nullptr;        // GEMM outputs, memory-kernel destination
  int64_t act_n = 0, buf_a_n = 0, buf_c_n = 0;
  std::vector<std::vector<int64_t>> x_offset;  // [op][gemm] -> element offset in act
  std::vector<int64_t> embed_width;            // [op] row width of the embedding gradient
  int step = 0;

  std::vector<cudaEvent_t> ready, done;
  std::map<std::pair<int, int>, cudaEvent_t> marks;

  Impl(const StepPlan& p, const StepLayout& l, const CudaExecutorConfig& c)
      : plan(p), layout(l), cfg(c), arena(c.device) {}

  cudaStream_t stream(Stream s) const { return s == Stream::compute ? compute : comm_stream; }
  char* at(void* base, int64_t elems) const { return static_cast<char*>(base) + elems * eb; }
  void* grad_ptr(int g) const { return at(layout.bucket_view ? grads : param_grads, layout.grads[g].flat_offset); }
  cudaEvent_t mark_event(Mark m, int index) {
    auto key = std::make_pair(static_cast<int>(m), index);
    auto it = marks.find(key);
    if (it != marks.end()) return it->second;
    cudaEvent_t e = nullptr;
    check(cudaEventCreate(&e), "cudaEventCreate");
    return marks.emplace(key, e).first->second;
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
  s.comm = static_cast<ncclComm_t>(config.nccl_comm);

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

  MemoryNeed need;
  need.model_state_bytes = static_cast<double>(total) * (2.0 * s.eb + (need_master ? 4.0 : 0.0) + 4.0 * moments);
  need.ddp_buffer_bytes = layout.bucket_view ? 0.0 : static_cast<double>(total) * s.eb;
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
  s.weights = s.arena.allocate(total * s.eb, "weights");
  s.grads = s.arena.allocate(total * s.eb, "gradient buckets");
  if (!layout.bucket_view) s.param_grads = s.arena.allocate(total * s.eb, "parameter gradients (no bucket views)");
  if (need_master) s.master = static_cast<float*>(s.arena.allocate(total * 4, "fp32 master weights"));
  if (moments >= 1) s.m1 = static_cast<float*>(s.arena.allocate(total * 4, "optimizer state (first moment)"));
  if (moments >= 2) s.m2 = static_cast<float*>(s.arena.allocate(total * 4, "optimizer state (second moment)"));
  s.act = s.arena.allocate(s.act_n * s.eb, "activations");
  s.buf_a = s.arena.allocate(s.buf_a_n * s.eb, "GEMM operand scratch");
  s.buf_c = s.arena.allocate(s.buf_c_n * s.eb, "GEMM output scratch");
  s.lt = std::make_unique<LtMatmul>(s.elem, workspace, s.arena, config.tf32);

  // Random (never zero) contents; rank-dependent gradients so the all-reduce averages real data.
  const uint64_t seed = config.seed;
  fill_random(s.elem, s.weights, total, seed + 1, 0.02f, s.compute);
  if (s.master) convert_to_f32(s.elem, s.weights, s.master, total, s.compute);
  fill_random(s.elem, s.grads, total, seed + 2 + 7919ull * static_cast<uint64_t>(config.rank), 0.01f, s.compute);
  if (s.param_grads) fill_random(s.elem, s.param_grads, total, seed + 3, 0.01f, s.compute);
  if (s.m1) fill_zero(s.m1, total * 4, s.compute);
  if (s.m2) fill_zero(s.m2, total * 4, s.compute);
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

  s.ready.resize(plan.buckets.size());
  s.done.resize(plan.buckets.size());
  for (auto& e : s.ready) check(cudaEventCreate(&e), "cudaEventCreate");
  for (auto& e : s.done) check(cudaEventCreate(&e), "cudaEventCreate");
  check(cudaStreamSynchronize(s.compute), "initialising GPU memory");
}

CudaExecutor::~CudaExecutor() {
  if (!impl_) return;
  Impl& s = *impl_;
  cudaSetDevice(s.cfg.device);
  cudaStreamSynchronize(s.compute);
  cudaStreamSynchronize(s.comm_stream);
  for (auto e : s.ready) cudaEventDestroy(e);
  for (auto e : s.done) cudaEventDestroy(e);
  for (auto& [k, e] : s.marks) cudaEventDestroy(e);
  s.lt.reset();
  if (s.compute) cudaStreamDestroy(s.compute);
  if (s.comm_stream) cudaStreamDestroy(s.comm_stream);
}

double CudaExecutor::allocated_bytes() const { return impl_->arena.allocated_bytes(); }

void CudaExecutor::gemm(const GemmCall& c) {
  Impl& s = *impl_;
  const int64_t x_off = s.x_offset.at(static_cast<size_t>(c.op)).at(static_cast<size_t>(c.gemm));
  const void* x = s.at(s.act, x_off);
  const int g = s.layout.gemm_grad.at(static_cast<size_t>(c.op)).at(static_cast<size_t>(c.gemm));
  const void* weight = g >= 0 ? static_cast<const void*>(s.at(s.weights, s.layout.grads[g].flat_offset)) : s.buf_a;
  MatmulArgs a;
  a.m = c.m;
  a.n = c.n;
  a.k = c.k;
  switch (c.role) {
    case GemmRole::forward:  // Y[m,n] = X[m,k] W[k,n]
      a.a = x;
      a.b = weight;
      a.c = s.buf_c;
      break;
    case GemmRole::backward_input:  // dX[m,k] = dY[m,n] W^T  (W stored [k,n])
      a.a = s.buf_a;
      a.b = weight;
      a.trans_b = true;
      a.c = s.buf_c;
      break;
    case GemmRole::backward_weight:  // dW[k,n] = X^T dY  (X stored [m,k])
      a.a = x;
      a.trans_a = true;
      a.b = s.buf_a;
      a.c = c.grad >= 0 ? s.grad_ptr(c.grad) : s.buf_c;
      a.beta = c.accumulate ? 1.0f : 0.0f;
      break;
  }
  s.lt->run(a, s.compute);
}

void CudaExecutor::batched_gemm(const GemmCall& c) {
  Impl& s = *impl_;
  const void* x = s.at(s.act, s.x_offset.at(static_cast<size_t>(c.op)).at(static_cast<size_t>(c.gemm)));
  MatmulArgs a;
  a.m = c.m;
  a.n = c.n;
  a.k = c.k;
  a.batch = c.batch;
  a.c = s.buf_c;
  a.stride_c = c.m * c.n;
  switch (c.role) {
    case GemmRole::forward:  // C = A B: A [m,k] saved activations, B [k,n]
      a.a = x;
      a.stride_a = c.m * c.k;
      a.b = s.buf_a;
      a.stride_b = c.k * c.n;
      break;
    case GemmRole::backward_input:  // dA[m,k] = dC[m,n] B^T (B stored [k,n]: here c.n = k, c.k = n)
      a.a = s.buf_a;
      a.stride_a = c.m * c.k;
      a.b = s.buf_a;
      a.trans_b = true;
      a.stride_b = c.k * c.n;
      break;
    case GemmRole::backward_weight:  // dB[k,n] = A^T dC (A stored [m,k]: here c.k = m)
      a.a = x;
      a.trans_a = true;
      a.stride_a = c.m * c.k;
      a.b = s.buf_a;
      a.stride_b = c.k * c.n;
      break;
  }
  s.lt->run(a, s.compute);
}

void CudaExecutor::memory_kernel(const MemoryCall& c) {
  Impl& s = *impl_;
  const int64_t n = static_cast<int64_t>(c.bytes / 2.0 / s.eb);  // half read, half written
  switch (c.role) {
    case MemoryRole::forward: stream_rw(s.elem, s.act, s.act_n, s.buf_c, s.buf_c_n, n, s.compute); break;
    case MemoryRole::backward: stream_rw(s.elem, s.buf_a, s.buf_a_n, s.buf_c, s.buf_c_n, n, s.compute); break;
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
      copy(s.at(s.grads, slot.flat_offset), s.at(s.param_grads, slot.flat_offset), s.plan.grads[c.grad].numel * s.eb,
           s.compute);
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
  auto& list = e.kind == EventKind::bucket_ready ? s.ready : s.done;
  check(cudaEventRecord(list.at(static_cast<size_t>(e.bucket)), s.stream(stream)), "cudaEventRecord (bucket)");
}

void CudaExecutor::stream_wait(Stream waiter, EventRef e) {
  Impl& s = *impl_;
  auto& list = e.kind == EventKind::bucket_ready ? s.ready : s.done;
  check(cudaStreamWaitEvent(s.stream(waiter), list.at(static_cast<size_t>(e.bucket)), 0), "cudaStreamWaitEvent");
}

void CudaExecutor::allreduce_bucket(int bucket) {
  Impl& s = *impl_;
  const auto b = static_cast<size_t>(bucket);
  void* ptr = s.at(s.grads, s.layout.bucket_offset.at(b));
  const auto count = static_cast<size_t>(s.layout.bucket_numel.at(b));
  if (!s.comm) {  // world 1 without a communicator (tests): the average of one is itself
    if (s.cfg.world != 1)
      throw RuntimeError("CudaExecutor: no NCCL communicator for a world of " + std::to_string(s.cfg.world));
    return;
  }
  const ncclResult_t r = ncclAllReduce(ptr, ptr, count, nccl_type(s.elem), ncclAvg, s.comm, s.comm_stream);
  check(r, fmt::format("ncclAllReduce of bucket {} on rank {}", bucket, s.cfg.rank).c_str());
  if (r == ncclInProgress)
    wait_comm(s.comm, s.cfg.watchdog_s, fmt::format("all-reduce of bucket {} on rank {}", bucket, s.cfg.rank));
}

void CudaExecutor::optimizer_step() {
  Impl& s = *impl_;
  ++s.step;
  const int64_t n = s.layout.total_numel;
  const void* g = s.layout.bucket_view ? s.grads : s.param_grads;
  switch (s.cfg.optimizer) {
    case Optimizer::adamw: adamw_step(s.elem, s.weights, g, s.master, s.m1, s.m2, n, s.step, AdamW{}, s.compute); break;
    case Optimizer::sgd_momentum:
      sgd_step(s.elem, s.weights, g, s.master, s.m1, n, 1e-3f, 0.9f, 0.0f, s.compute);
      break;
    case Optimizer::sgd: sgd_step(s.elem, s.weights, g, s.master, nullptr, n, 1e-3f, 0.0f, 0.0f, s.compute); break;
  }
}

void CudaExecutor::mark(Stream stream, Mark m, int index) {
  Impl& s = *impl_;
  check(cudaEventRecord(s.mark_event(m, index), s.stream(stream)), "cudaEventRecord (timing)");
}

StepSample CudaExecutor::finish_step() {
  Impl& s = *impl_;
  const double t0 = now_s();
  // Watchdog: every bucket's all-reduce must finish within watchdog_s of the step's launch.
  for (size_t b = 0; b < s.done.size(); ++b) {
    for (;;) {
      const cudaError_t q = cudaEventQuery(s.done[b]);
      if (q == cudaSuccess) break;
      if (q != cudaErrorNotReady) check(q, fmt::format("all-reduce of bucket {} on rank {}", b, s.cfg.rank).c_str());
      const std::string what =
          fmt::format("all-reduce of bucket {} ({:.1f} MB) on rank {} (GPU {})", b,
                      static_cast<double>(s.plan.buckets[b].bytes) / 1e6, s.cfg.rank, s.cfg.device);
      if (s.comm) {
        ncclResult_t state = ncclSuccess;
        ncclCommGetAsyncError(s.comm, &state);
        if (state != ncclSuccess && state != ncclInProgress) {
          ncclCommAbort(s.comm);
          s.comm = nullptr;
          throw RuntimeError(fmt::format("{}: NCCL error {}; communicator aborted", what, ncclGetErrorString(state)));
        }
      }
      const bool peer_failed = s.cfg.abort_flag && s.cfg.abort_flag->load();
      if (now_s() - t0 > s.cfg.watchdog_s || peer_failed) {
        if (s.comm) ncclCommAbort(s.comm);
        s.comm = nullptr;
        throw RuntimeError(peer_failed
                               ? fmt::format("{}: another rank failed; communicator aborted", what)
                               : fmt::format("{} not done after {:.0f} s (watchdog, --watchdog); communicator aborted",
                                             what, s.cfg.watchdog_s));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  check(cudaStreamSynchronize(s.compute), "training step (compute stream)");

  StepSample out;
  cudaEvent_t begin = s.mark_event(Mark::step_begin, 0);
  out.step_s = s.since(begin, s.mark_event(Mark::optimizer_end, 0));
  out.optimizer_s = s.since(s.mark_event(Mark::optimizer_begin, 0), s.mark_event(Mark::optimizer_end, 0));
  const int micro = static_cast<int>(std::max<int64_t>(1, s.plan.gradient_accumulation));
  for (int i = 0; i < micro; ++i) {
    out.forward_s += s.since(s.mark_event(Mark::forward_begin, i), s.mark_event(Mark::forward_end, i));
    out.backward_s += s.since(s.mark_event(Mark::forward_end, i), s.mark_event(Mark::backward_end, i));
  }
  out.backward_end_s = s.since(begin, s.mark_event(Mark::backward_end, micro - 1));
  for (size_t b = 0; b < s.ready.size(); ++b) {
    BucketSample bs;
    bs.ready_s = s.since(begin, s.ready[b]);
    bs.start_s = s.since(begin, s.mark_event(Mark::bucket_start, static_cast<int>(b)));
    bs.end_s = s.since(begin, s.mark_event(Mark::bucket_end, static_cast<int>(b)));
    out.buckets.push_back(bs);
  }
  return out;
}

double CudaExecutor::time_single_allreduce(int reps) {
  Impl& s = *impl_;
  if (!s.comm) return 0;
  cudaEvent_t a = nullptr, b = nullptr;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    check(cudaEventRecord(a, s.comm_stream), "cudaEventRecord");
    const ncclResult_t r = ncclAllReduce(s.grads, s.grads, static_cast<size_t>(s.layout.total_numel), nccl_type(s.elem),
                                         ncclAvg, s.comm, s.comm_stream);
    check(r, "ncclAllReduce (all gradients)");
    if (r == ncclInProgress) wait_comm(s.comm, s.cfg.watchdog_s, "all-reduce of all gradients");
    check(cudaEventRecord(b, s.comm_stream), "cudaEventRecord");
    const double t0 = now_s();
    while (cudaEventQuery(b) == cudaErrorNotReady) {
      if (now_s() - t0 > s.cfg.watchdog_s) {
        ncclCommAbort(s.comm);
        s.comm = nullptr;
        throw RuntimeError(fmt::format("all-reduce of all gradients on rank {} not done after {:.0f} s (watchdog)",
                                       s.cfg.rank, s.cfg.watchdog_s));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
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
}

std::vector<float> CudaExecutor::grad(int g) const {
  const Impl& s = *impl_;
  synchronize();
  return download(s.at(s.grads, s.layout.grads.at(static_cast<size_t>(g)).flat_offset), s.plan.grads[g].numel, s.elem);
}

std::vector<float> CudaExecutor::weights(int g) const {
  const Impl& s = *impl_;
  synchronize();
  return download(s.at(s.weights, s.layout.grads.at(static_cast<size_t>(g)).flat_offset), s.plan.grads[g].numel,
                  s.elem);
}

std::vector<float> CudaExecutor::master(int g) const {
  const Impl& s = *impl_;
  synchronize();
  const int64_t off = s.layout.grads.at(static_cast<size_t>(g)).flat_offset;
  if (!s.master) return weights(g);
  return download(s.master + off, s.plan.grads[g].numel, Elem::fp32);
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

}  // namespace dpsim::backend
