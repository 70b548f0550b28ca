#include "device.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "dpsim/error.hpp"

namespace dpsim::backend::cuda {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw RuntimeError(fmt::format("{}: {} ({})", what, cudaGetErrorString(err), cudaGetErrorName(err)));
}
void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw RuntimeError(
        fmt::format("{}: cuBLAS status {} ({})", what, static_cast<int>(status), cublasLtGetStatusString(status)));
}
void check(ncclResult_t result, const char* what) {
  if (result != ncclSuccess && result != ncclInProgress)
    throw RuntimeError(
        fmt::format("{}: NCCL error {} ({})", what, static_cast<int>(result), ncclGetErrorString(result)));
}

Elem elem_of(Dtype dtype) {
  switch (dtype) {
    case Dtype::bf16: return Elem::bf16;
    case Dtype::fp16: return Elem::fp16;
    case Dtype::fp32: return Elem::fp32;
  }
  return Elem::bf16;
}
cudaDataType_t cuda_type(Elem e) {
  switch (e) {
    case Elem::bf16: return CUDA_R_16BF;
    case Elem::fp16: return CUDA_R_16F;
    case Elem::fp32: return CUDA_R_32F;
  }
  return CUDA_R_16BF;
}
ncclDataType_t nccl_type(Elem e) {
  switch (e) {
    case Elem::bf16: return ncclBfloat16;
    case Elem::fp16: return ncclHalf;
    case Elem::fp32: return ncclFloat;
  }
  return ncclBfloat16;
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::string device_name(int device) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return "unknown GPU";
  return prop.name;
}

// ---- memory -----------------------------------------------------------------------------------

DeviceArena::~DeviceArena() {
  int prev = 0;
  cudaGetDevice(&prev);
  cudaSetDevice(device_);
  for (void* p : blocks_) cudaFree(p);
  cudaSetDevice(prev);
}

void* DeviceArena::allocate(int64_t bytes, const std::string& what) {
  if (bytes <= 0) bytes = 256;
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, static_cast<size_t>(bytes));
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error state of a failed allocation
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw RuntimeError(fmt::format(
        "cudaMalloc of {} ({:.2f} GB) failed on GPU {} ({}): {}; {:.1f} GB allocated so far, {:.1f} GB free", what,
        static_cast<double>(bytes) / 1e9, device_, device_name(device_), cudaGetErrorString(err), allocated_ / 1e9,
        static_cast<double>(free_b) / 1e9));
  }
  blocks_.push_back(p);
  allocated_ += static_cast<double>(bytes);
  return p;
}

// ---- cublasLt ---------------------------------------------------------------------------------

namespace {
int64_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  int64_t al = 256;
  while (al > 1 && (a % static_cast<uintptr_t>(al)) != 0) al /= 2;
  return al;
}
}  // namespace

MatmulArgs step_matmul(const GemmCall& c, const GemmOperands& o) {
  MatmulArgs a;
  a.m = c.m;
  a.n = c.n;
  a.k = c.k;
  a.batch = c.batch;
  a.c = o.out;
  if (c.batch > 1) a.stride_c = c.m * c.n;
  const bool batched = c.batch > 1;
  switch (c.role) {
    case GemmRole::forward:  // Y = X W
      a.a = o.x;
      a.b = o.weight;
      break;
    case GemmRole::backward_input:  // dX = dY W^T
      a.a = o.dy;
      a.b = o.weight;
      a.trans_b = true;
      break;
    case GemmRole::backward_weight:  // dW = X^T dY
      a.a = o.x;
      a.trans_a = true;
      a.b = o.dy;
      a.beta = c.accumulate ? 1.0f : 0.0f;
      break;
  }
  if (batched) {
    a.stride_a = c.m * c.k;
    a.stride_b = c.k * c.n;
  }
  return a;
}

LtMatmul::LtMatmul(Elem elem, size_t workspace_bytes, DeviceArena& arena, bool tf32)
    : elem_(elem), tf32_(tf32 && elem == Elem::fp32), workspace_bytes_(workspace_bytes) {
  check(cublasLtCreate(&handle_), "cublasLtCreate");
  workspace_ = arena.allocate(static_cast<int64_t>(workspace_bytes), "cuBLASLt workspace");
}

LtMatmul::~LtMatmul() {
  for (auto& [key, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.la);
    cublasLtMatrixLayoutDestroy(p.lb);
    cublasLtMatrixLayoutDestroy(p.lc);
    cublasLtMatmulDescDestroy(p.desc);
  }
  if (handle_) cublasLtDestroy(handle_);
}

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLAS's "A" is our B.
LtMatmul::Plan& LtMatmul::plan_for(const MatmulArgs& x) {
  const std::array<int64_t, 14> key = {x.trans_a,
                                       x.trans_b,
                                       x.m,
                                       x.n,
                                       x.k,
                                       x.batch,
                                       x.stride_a,
                                       x.stride_b,
                                       x.stride_c,
                                       alignment_of(x.a),
                                       alignment_of(x.b),
                                       alignment_of(x.c),
                                       x.beta != 0.0f,
                                       0};
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;

  Plan p;
  const cudaDataType_t t = cuda_type(elem_);
  check(cublasLtMatmulDescCreate(&p.desc, tf32_ ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F),
        "cublasLtMatmulDescCreate");
  const cublasOperation_t op_first = x.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;   // cuBLAS A = our B
  const cublasOperation_t op_second = x.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLAS B = our A
  check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first), "set TRANSA");
  check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second),
        "set TRANSB");
  // Stored shapes (column-major view of the row-major buffers).
  const uint64_t a_rows = static_cast<uint64_t>(x.trans_b ? x.k : x.n),
                 a_cols = static_cast<uint64_t>(x.trans_b ? x.n : x.k);
  const uint64_t b_rows = static_cast<uint64_t>(x.trans_a ? x.m : x.k),
                 b_cols = static_cast<uint64_t>(x.trans_a ? x.k : x.m);
  check(cublasLtMatrixLayoutCreate(&p.la, t, a_rows, a_cols, static_cast<int64_t>(a_rows)), "layout A");
  check(cublasLtMatrixLayoutCreate(&p.lb, t, b_rows, b_cols, static_cast<int64_t>(b_rows)), "layout B");
  check(cublasLtMatrixLayoutCreate(&p.lc, t, static_cast<uint64_t>(x.n), static_cast<uint64_t>(x.m), x.n), "layout C");
  if (x.batch > 1) {
    const auto count = static_cast<int32_t>(x.batch);
    for (auto [layout, stride] :
         {std::pair{p.la, x.stride_b}, std::pair{p.lb, x.stride_a}, std::pair{p.lc, x.stride_c}}) {
      check(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
            "batch count");
      check(
          cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
          "batch stride");
    }
  }
  cublasLtMatmulPreference_t pref = nullptr;
  check(cublasLtMatmulPreferenceCreate(&pref), "preference");
  check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_,
                                             sizeof workspace_bytes_),
        "workspace preference");
  const auto al_a = static_cast<uint32_t>(alignment_of(x.b)), al_b = static_cast<uint32_t>(alignment_of(x.a)),
             al_c = static_cast<uint32_t>(alignment_of(x.c));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.la, p.lb, p.lc, p.lc, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0)
    throw RuntimeError(fmt::format("cuBLASLt has no algorithm for a {}x{}x{} (batch {}) GEMM", x.m, x.n, x.k, x.batch));
  p.algo = result.algo;
  return plans_.emplace(key, p).first->second;
}

void LtMatmul::run(const MatmulArgs& x, cudaStream_t stream) {
  if (x.m <= 0 || x.n <= 0 || x.k <= 0) return;
  Plan& p = plan_for(x);
  const float alpha = 1.0f;
  check(cublasLtMatmul(handle_, p.desc, &alpha, x.b, p.la, x.a, p.lb, &x.beta, x.c, p.lc, x.c, p.lc, &p.algo,
                       workspace_, workspace_bytes_, stream),
        "cublasLtMatmul");
}

// ---- NCCL -------------------------------------------------------------------------------------

void wait_comm(ncclComm_t& comm, double timeout_s, const std::string& what) {
  const double t0 = now_s();
  for (;;) {
    ncclResult_t state = ncclSuccess;
    check(ncclCommGetAsyncError(comm, &state), "ncclCommGetAsyncError");
    if (state == ncclSuccess) return;
    const bool failed = state != ncclInProgress;
    if (failed || now_s() - t0 > timeout_s) {
      ncclCommAbort(comm);
      comm = nullptr;
      throw RuntimeError(
          failed ? fmt::format("{}: NCCL error {} ({}); communicator aborted", what, static_cast<int>(state),
                               ncclGetErrorString(state))
                 : fmt::format("{}: not done after {:.0f} s (watchdog); communicator aborted", what, timeout_s));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

namespace {
ncclConfig_t comm_config(bool blocking) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = blocking ? 1 : 0;
  return config;
}
}  // namespace

std::vector<ncclComm_t> init_local_comms(const std::vector<int>& devices, double timeout_s) {
  ncclUniqueId id;
  check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  ncclConfig_t config = comm_config(false);
  check(ncclGroupStart(), "ncclGroupStart");
  for (size_t i = 0; i < devices.size(); ++i) {
    check(cudaSetDevice(devices[i]), "cudaSetDevice");
    check(ncclCommInitRankConfig(&comms[i], static_cast<int>(devices.size()), id, static_cast<int>(i), &config),
          "ncclCommInitRankConfig");
  }
  check(ncclGroupEnd(), "ncclGroupEnd (communicator init)");
  for (size_t i = 0; i < comms.size(); ++i) wait_comm(comms[i], timeout_s, fmt::format("NCCL init of rank {}", i));
  return comms;
}

ncclComm_t init_rank_comm(const ncclUniqueId& id, int world, int rank, int device, double timeout_s) {
  check(cudaSetDevice(device), "cudaSetDevice");
  ncclComm_t comm = nullptr;
  ncclConfig_t config = comm_config(false);
  check(ncclCommInitRankConfig(&comm, world, id, rank, &config), "ncclCommInitRankConfig");
  wait_comm(comm, timeout_s, fmt::format("NCCL init of rank {}", rank));
  return comm;
}

ncclComm_t split_blocking(ncclComm_t parent, int color, int key, double timeout_s, const std::string& what) {
  ncclConfig_t config = comm_config(true);
  ncclComm_t child = nullptr;
  const ncclResult_t r = ncclCommSplit(parent, color, key, &child, &config);
  check(r, what.c_str());
  // The child's state says when the split is done (at once for a blocking child); on failure only the child is
  // aborted: the parent stays its owner's.
  if (child) wait_comm(child, timeout_s, what);
  if (!child) throw RuntimeError(what + ": ncclCommSplit gave no communicator");
  return child;
}

void destroy_comm(ncclComm_t& comm) {
  if (comm) ncclCommDestroy(comm);
  comm = nullptr;
}

// ---- watchdog ---------------------------------------------------------------------------------

Watchdog::Watchdog(int device, std::vector<ncclComm_t*> comms, double timeout_s, const std::atomic<bool>* peer_failed)
    : device_(device), comms_(std::move(comms)), timeout_s_(timeout_s), peer_failed_(peer_failed) {
  thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void Watchdog::watch(cudaEvent_t done, std::string what) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back({done, std::move(what), now_s()});
  }
  changed_.notify_all();
}

void Watchdog::wait_all() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return pending_.empty() || !failure_.empty(); });
  if (!failure_.empty()) throw RuntimeError(failure_);
}

bool Watchdog::aborted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !failure_.empty();
}

void Watchdog::abort_locked(const std::string& why) {
  for (ncclComm_t* c : comms_)
    if (*c) {
      ncclCommAbort(*c);
      *c = nullptr;
    }
  failure_ = why;
  pending_.clear();
}

void Watchdog::loop() {
  cudaSetDevice(device_);
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    if (pending_.empty() || !failure_.empty()) {
      changed_.wait(lock, [this] { return stop_ || (!pending_.empty() && failure_.empty()); });
      continue;
    }
    const Item item = pending_.front();
    lock.unlock();
    const cudaError_t q = cudaEventQuery(item.done);
    ncclResult_t async = ncclSuccess;
    for (ncclComm_t* c : comms_)
      if (*c && async == ncclSuccess) ncclCommGetAsyncError(*c, &async);
    const bool peer = peer_failed_ && peer_failed_->load();
    const bool late = now_s() - item.since_s > timeout_s_;
    lock.lock();
    if (pending_.empty() || pending_.front().done != item.done) continue;
    if (q == cudaSuccess) {
      pending_.pop_front();
      changed_.notify_all();
    } else if (q != cudaErrorNotReady) {
      abort_locked(fmt::format("{}: {}; communicators aborted", item.what, cudaGetErrorString(q)));
      changed_.notify_all();
    } else if (async != ncclSuccess && async != ncclInProgress) {
      abort_locked(fmt::format("{}: NCCL error {}; communicators aborted", item.what, ncclGetErrorString(async)));
      changed_.notify_all();
    } else if (peer || late) {
      abort_locked(peer ? fmt::format("{}: another rank failed; communicators aborted", item.what)
                        : fmt::format("{} not done after {:.0f} s (watchdog, --watchdog); communicators aborted",
                                      item.what, timeout_s_));
      changed_.notify_all();
    } else {
      changed_.wait_for(lock, std::chrono::microseconds(50));
    }
  }
}

}  // namespace dpsim::backend::cuda
