#pragma once
// Internal helpers of dpsim_cuda: error checks with clear messages, device buffers, the cublasLt
// row-major matmul with a per-shape plan cache, and NCCL communicator setup.
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

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

// Non-blocking communicators, one per local device, in this process (ncclCommInitRankConfig in a
// group with one unique id). Waits (with `timeout_s`) for the initialisation to finish.
std::vector<ncclComm_t> init_local_comms(const std::vector<int>& devices, double timeout_s);
ncclComm_t init_rank_comm(const ncclUniqueId& id, int world, int rank, int device, double timeout_s);
// Polls a non-blocking communicator until its last operation is issued; throws with `what`.
void wait_comm(ncclComm_t comm, double timeout_s, const std::string& what);

std::string device_name(int device);
double now_s();  // steady clock

}  // namespace dpsim::backend::cuda
