#pragma once
// The CUDA/NCCL backend (target dpsim_cuda, built when DPSIM_HAVE_CUDA). No CUDA header leaks out:
// the executor keeps its device state behind a pointer.
#include <atomic>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "dpsim/backend/calibration.hpp"
#include "dpsim/backend/executor.hpp"
#include "dpsim/backend/measure.hpp"
#include "dpsim/result.hpp"
#include "dpsim/scenario.hpp"

namespace dpsim::backend {

struct MachineInfo {
  std::vector<MachineGpu> gpus;
  std::string driver_version;  // kernel module version (and the CUDA driver API version)
  std::string cuda_runtime_version;
  std::string nccl_version;
  std::string cublas_version;
};

// Throws RuntimeError "no CUDA device ..." when none is usable.
MachineInfo query_machine();

struct CudaExecutorConfig {
  int device = 0;
  int rank = 0;
  int world = 1;
  void* nccl_comm = nullptr;  // the world's ncclComm_t (the executor splits its groups' from it); nullptr: world 1
  Dtype dtype = Dtype::bf16;
  bool tf32 = false;  // fp32 GEMMs on TF32 tensor cores (scenario training.tf32)
  Optimizer optimizer = Optimizer::adamw;
  double watchdog_s = 300;
  uint64_t seed = 1234;
  bool check_memory = true;                       // compare the need with free memory before allocating
  const std::atomic<bool>* abort_flag = nullptr;  // set when another rank failed: abort, don't wait
};

// One GPU's executor: allocates the model's memory (weights, bucketed gradients, fp32 master and
// optimizer state, an activation arena of the plan's size, GEMM scratch), launches real kernels.
class CudaExecutor final : public Executor {
 public:
  CudaExecutor(const StepPlan& plan, const StepLayout& layout, const CudaExecutorConfig& config);
  ~CudaExecutor() override;
  CudaExecutor(const CudaExecutor&) = delete;
  CudaExecutor& operator=(const CudaExecutor&) = delete;

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

  // Waits for the step (the watchdog thread watches every collective), returns its CUDA-event timings (a pipeline
  // stage's: its compute stream's spans, add_stage_spans).
  StepSample finish_step();

  // All gradients as one message (median of `reps`, seconds); on one GPU near zero.
  double time_single_allreduce(int reps);

  double allocated_bytes() const;

  // ---- test hooks: host copies (as float) of device buffers ----
  std::vector<float> grad(int g) const;                   // the gradient's bucket slice
  std::vector<float> weights(int g) const;                // low-precision weights
  std::vector<float> master(int g) const;                 // fp32 master (weights when fp32)
  std::vector<float> gemm_input(int op, int gemm) const;  // X [m,k] the op's GEMM reads (row-major)
  std::vector<float> gemm_grad_output() const;            // dY buffer (row-major, first m*n elements used)
  std::vector<float> gemm_output(int64_t count) const;    // the first `count` elements a GEMM with no gradient wrote
  void synchronize() const;
  // Time one GEMM of the plan alone on the compute stream (seconds, median of reps).
  double time_gemm(const GemmCall& call, int reps);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// `dpsim measure`: runs warmup + iters steps on the selected GPUs (one thread per GPU, or one
// rank per GPU under mpirun), returns the assembled result. With pipeline stages each rank runs its stage's program
// in its stage's layout (rank_stage), and every rank's samples reach the output rank. Progress lines go to `log`.
StepResult measure_on_gpus(const Scenario& scenario, const StepPlan& plan, const MeasureOptions& options,
                           const std::string& scenario_file, std::ostream& log);

// `dpsim measure --calibrate`: GEMM efficiency per distinct shape of the plan (and a standard set),
// HBM copy and optimizer bandwidth, an all-reduce sweep 8 B .. 4 GiB (printed like nccl-tests).
Calibration calibrate_on_gpus(const Scenario& scenario, const StepPlan& plan, const MeasureOptions& options,
                              std::ostream& log);

// Communicators for GPUs 0..count-1 of this process (tests, calibration); opaque ncclComm_t.
std::vector<void*> make_local_communicators(int count, double timeout_s = 120);
void destroy_communicator(void* comm);

// False on every MPI rank but 0 (under mpirun/srun with an MPI build): only rank 0 prints and writes.
bool is_output_rank();

}  // namespace dpsim::backend
