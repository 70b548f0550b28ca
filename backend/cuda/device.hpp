#pragma once
// Internal helpers of dpsim_cuda: error checks with clear messages, device buffers, the cublasLt
// row-major matmul with a per-shape plan cache, and NCCL communicator setup.
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dpsim/backend/executor.hpp"
#include "dpsim/scenario.hpp"
#include "kernels.hpp"

namespace dpsim::backend::cuda {

void check(cudaError_t err, const char* what);
void check(cublasStatus_t status, const char* what);
void check(ncclResult_t result, const char* what);

Elem elem_of(Dtype dtype);
cudaDataType_t cuda_type(Elem e);
ncclDataType_t nccl_type(Elem e);

// cudaMalloc that says what failed and how much: "cudaMalloc of optimizer moments (64.2 GB) failed
// on GPU 0 (NVIDIA H100 80GB HBM3): out of memory; 72.1 GB allocated so far, 3.2 GB free".
class DeviceArena {
 public:
  explicit DeviceArena(int device) : device_(device) {}
  ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  void* allocate(int64_t bytes, const std::string& what);
  double allocated_bytes() const { return allocated_; }

 private:
  int device_;
  double allocated_ = 0;
  std::vector<void*> blocks_;
};

// C[M,N] = op(A)[M,K] op(B)[K,N] (+ beta C), row-major, batched with element strides.
struct MatmulArgs {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  float beta = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

// One GEMM of the step as the executor runs it (row-major; executor.hpp's GemmRole), the layouts included:
//   forward          Y[m,n]  = X[m,k] W[k,n]
//   backward_input   dX[m,k] = dY[m,n] W^T     (W stored [k,n]: trans_b)
//   backward_weight  dW[k,n] = X^T dY          (X stored [m,k]: trans_a), beta 1 when accumulating
// Batched products (attention) have no weights: `weight` is a second activation operand; strides per batch.
struct GemmOperands {
  const void* x = nullptr;       // saved activation
  const void* weight = nullptr;  // W, or the second operand of a batched product
  const void* dy = nullptr;      // the gradient of the output
  void* out = nullptr;
};
MatmulArgs step_matmul(const GemmCall& call, const GemmOperands& operands);

class LtMatmul {
 public:
  // tf32: fp32 operands multiplied on TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32)
  LtMatmul(Elem elem, size_t workspace_bytes, DeviceArena& arena, bool tf32 = false);
  ~LtMatmul();
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;
  void run(const MatmulArgs& args, cudaStream_t stream);

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  Plan& plan_for(const MatmulArgs& args);
  Elem elem_;
  bool tf32_ = false;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<std::array<int64_t, 14>, Plan> plans_;
};

// World communicators: non-blocking (so that their initialisation can time out), one per local device in this
// process (ncclCommInitRankConfig in a group with one unique id) or this rank's. Waits (with `timeout_s`) for the
// initialisation to finish.
std::vector<ncclComm_t> init_local_comms(const std::vector<int>& devices, double timeout_s);
ncclComm_t init_rank_comm(const ncclUniqueId& id, int world, int rank, int device, double timeout_s);
// Polls a non-blocking communicator until its last operation is issued. On an NCCL error or after timeout_s it
// aborts the communicator, sets `comm` to nullptr (so that nobody destroys it again) and throws with `what`.
void wait_comm(ncclComm_t& comm, double timeout_s, const std::string& what);
// A blocking communicator over the ranks of `parent` that pass the same `color` (ncclCommSplit; every rank of the
// parent calls it, `key` orders the ranks). The step's collectives run on these: an NCCL call returns once it is
// enqueued, and the watchdog thread, not the issuing thread, waits for the GPU.
ncclComm_t split_blocking(ncclComm_t parent, int color, int key, double timeout_s, const std::string& what);
// Destroys `comm` unless it is nullptr (aborted); sets it to nullptr.
void destroy_comm(ncclComm_t& comm);

// The watchdog of one rank's communicators, on its own thread (as PyTorch's ProcessGroupNCCL runs its
// watchdog): the issuing thread hands it each collective's end event and goes on queuing work. A collective
// not done `timeout_s` after it was handed over, an asynchronous NCCL error, or a failed peer (`peer_failed`)
// aborts every communicator (which also releases a thread blocked inside NCCL); wait_all() then throws what
// was late. The communicators stay owned by the caller: after an abort they are set to nullptr.
class Watchdog {
 public:
  Watchdog(int device, std::vector<ncclComm_t*> comms, double timeout_s, const std::atomic<bool>* peer_failed);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  void watch(cudaEvent_t done, std::string what);  // returns at once
  void wait_all();                                 // until every watched event is done; throws the failure
  bool aborted() const;

 private:
  struct Item {
    cudaEvent_t done;
    std::string what;
    double since_s;
  };
  void loop();
  void abort_locked(const std::string& why);
  int device_;
  std::vector<ncclComm_t*> comms_;
  double timeout_s_;
  const std::atomic<bool>* peer_failed_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Item> pending_;
  std::string failure_;
  bool stop_ = false;
  std::thread thread_;
};

std::string device_name(int device);
double now_s();  // steady clock

}  // namespace dpsim::backend::cuda
