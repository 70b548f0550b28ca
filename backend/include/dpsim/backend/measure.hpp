#pragma once
// Host-side pieces of `dpsim measure` that need no GPU: options, statistics, the warm-up/timed loop,
// the memory and machine checks, and the assembly of measured timings into a StepResult.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dpsim/backend/executor.hpp"
#include "dpsim/plan.hpp"
#include "dpsim/result.hpp"
#include "dpsim/scenario.hpp"

namespace dpsim::backend {

struct MeasureOptions {
  int gpus = 0;             // 0: the scenario's world size; else use this many (recorded in the result)
  int warmup = 3;           // untimed iterations; iteration 0 (DDP's special one) is always among them
  int iters = 10;           // timed iterations
  double watchdog_s = 300;  // a collective not done after this long aborts the communicator
  bool calibrate = false;
  std::string calibration_out;  // --calibration-out; default calibration-<gpu>.yaml
};

// ---- statistics -------------------------------------------------------------------------------

// Percentile with linear interpolation between closest ranks (numpy's default); q in [0, 1].
double percentile(std::vector<double> values, double q);
Spread spread_of(const std::vector<double>& values);  // median, p10, p90

// The iteration loop: `warmup` untimed then `iters` timed calls of step(iteration, timed).
// Throws if warmup < 1 (iteration 0 must be excluded) or iters < 1.
void run_iterations(int warmup, int iters, const std::function<void(int iteration, bool timed)>& step);

// ---- checks -----------------------------------------------------------------------------------

// "needs 128.5 GB per GPU, this H100 has 79.1 GB free" (GB = 1e9 bytes, one decimal).
std::string memory_need_message(double need_bytes, const std::string& gpu_name, double free_bytes);
// Throws RuntimeError with the message above (and the breakdown) when need > free.
void check_memory(const MemoryNeed& need, const std::string& gpu_name, double free_bytes);
// Short name for messages: "NVIDIA H100 80GB HBM3" -> "H100".
std::string short_gpu_name(const std::string& name);

struct MachineGpu {
  int index = 0;
  std::string name;
  double total_bytes = 0;
  double free_bytes = 0;
};

// How many GPUs a run uses: the scenario's world size, or --gpus. Refuses too few GPUs on the
// machine, a count mismatch without --gpus, and a GPU model other than the scenario's.
struct GpuSelection {
  int count = 0;
  bool overridden = false;  // --gpus differs from the scenario's world size
  std::vector<std::string> warnings;
};
GpuSelection select_gpus(const Scenario& scenario, int requested_gpus, const std::vector<MachineGpu>& machine);

// The scenario as a run on `gpus` GPUs (--gpus N, or mpirun's ranks with --gpus): `scenario_file` loaded again as one
// node of `gpus` GPUs whose data-parallel degree is the rest (gpus / (tensor x pipeline)), so that its plan, process
// groups, shards and throughput are the run's. `scenario` itself when the count is its own. A count the model-parallel
// degrees do not divide, or a shard group it cannot hold, is refused (InputError naming --gpus and the key).
Scenario scenario_on_gpus(const std::string& scenario_file, const Scenario& scenario, int gpus);

// Same product? Compares the catalog name with the device name, tolerant of vendor prefixes and
// suffixes ("NVIDIA H100 80GB HBM3" vs "H100-SXM": both H100).
bool same_gpu_model(const std::string& scenario_name, const std::string& device_name);

// ---- measured timings -> result ---------------------------------------------------------------

struct BucketSample {
  double ready_s = 0, start_s = 0, end_s = 0;  // relative to step begin
};

struct StepSample {  // one timed iteration on one rank
  double step_s = 0;
  double forward_s = 0;   // summed over micro-steps
  double backward_s = 0;  // summed over micro-steps
  double optimizer_s = 0;
  double backward_end_s = 0;          // of the synced micro-step, from step begin
  double optimizer_begin_s = 0;       // from step begin (after the last bucket's end)
  std::vector<BucketSample> buckets;  // every bucket of the plan; a pipeline stage's rank times its own only (0 others)
  // A pipeline stage's rank: its stage, and its compute stream's spans summed per StageWork (add_stage_spans):
  // forward_s, backward_s and optimizer_s are then its compute spans (no tensor collective inside), and these the rest.
  int stage = -1;  // -1: no pipeline stages
  double tensor_comm_s = 0;
  double p2p_s = 0;
  double neighbour_wait_s = 0;
  double exposed_comm_s = 0;
};

// A pipeline stage's compute-stream spans into `sample`: span i runs works[i] from begins_s[i] (from step begin) until
// the next one begins, the last until end_s (optimizer_end); each adds to its StageWork's figure. Throws
// RuntimeError where the lists differ in length or a span ends before it begins.
void add_stage_spans(const std::vector<StageWork>& works, const std::vector<double>& begins_s, double end_s,
                     StepSample& sample);

// The NCCL environment a scenario's `collective:` pins (NCCL_ALGO=Ring|Tree|NVLS, NCCL_PROTO=LL|LL128|Simple, as
// NCCL's documentation of those variables spells them), set before any communicator exists so that a scenario
// predicted as tree is measured as tree. `automatic` sets nothing: NCCL chooses.
std::vector<std::pair<std::string, std::string>> nccl_environment(const Collective& collective);
// Sets them (a different value already in the environment is replaced, with a note in `notes`); returns what
// the communicators run with: {"NCCL_ALGO": value or "NCCL's choice", "NCCL_PROTO": ...}.
std::vector<std::pair<std::string, std::string>> apply_nccl_environment(const Collective& collective,
                                                                        std::vector<std::string>& notes);

// The optimizer the executors run: one fused kernel over every parameter (backend/cuda/kernels.cu adamw_step and the
// SGD kernel), PyTorch's fused=True. A scenario's foreach or forloop (training.optimizer_impl) is what predict costs:
// measure says so and records what it ran (context.optimizer_impl), and validate predicts what was run.
inline constexpr OptimizerImpl kExecutorOptimizerImpl = OptimizerImpl::fused;
// The note measure prints when the scenario asks for another implementation; empty when they agree.
std::string optimizer_impl_note(const Scenario& scenario);

struct MeasureContext {
  std::string gpu_name;
  int gpu_count = 0;
  int scenario_world_size = 0;
  std::string driver_version;
  std::string cuda_runtime_version;
  std::string nccl_version;
  std::string cublas_version;
  std::string host;
  std::string git_revision;
  std::string scenario_hash;
  std::string optimizer_impl = to_string(kExecutorOptimizerImpl);  // what the step's optimizer ran as
  double gpu_memory_bytes = 0;
  double gpu_free_bytes = 0;
  int warmup = 0;
  int iters = 0;
  double watchdog_s = 0;
  double single_allreduce_s = 0;   // measured: all gradients as one message, median (0: not measured)
  std::string cuda_architectures;  // what the binary carries ("80-real ... 100-virtual")
  std::string kernel_image;        // what this GPU runs of it ("sm_90 machine code")
  std::vector<std::pair<std::string, std::string>> nccl_env;  // NCCL_ALGO / NCCL_PROTO the run used
};

// samples[rank][iteration]. Per figure, the median over iterations of the slowest rank; spreads
// carry median/p10/p90. Common figures come from core's fill_common. With pipeline stages (samples carry their
// stage), per stage the median over iterations of its slowest rank (stages[]: StageTiming as predict fills it; the
// bubble what its step leaves beside compute, tensor, p2p and exposed communication), the step the slowest rank's,
// and step.* the stage with the most compute (core's report_stages).
StepResult assemble_result(const Scenario& scenario, const StepPlan& plan, const MeasureContext& context,
                           const std::vector<std::vector<StepSample>>& samples);

nlohmann::json context_json(const MeasureContext& context);

// sha256-free, stable content hash of the scenario file: FNV-1a 64 of its bytes, hex.
std::string scenario_hash(const std::string& file);
std::string git_revision();  // DPSIM_GIT_REVISION at build time, else "unknown"
std::string host_name();

}  // namespace dpsim::backend
