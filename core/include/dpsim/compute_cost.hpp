#pragma once
// Compute time of plan operations on one GPU, shared by the estimator, the simulator and the dry run.
// Each op's time comes from its kind and shape (data/gpus.yaml explains the model and its constants):
// GEMMs through tile and wave quantization and their bytes, attention at the kernel's own efficiency,
// memory-bound ops at HBM bandwidth, and no op faster than the CPU can launch its kernels.
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "dpsim/plan.hpp"
#include "dpsim/scenario.hpp"

namespace dpsim {

struct ComputeModel {
  double peak_flops_per_s = 0;
  double gemm_efficiency = 0;  // the best-shape ceiling (MAMF)
  double memory_bandwidth_bytes_per_s = 0;
  double memory_efficiency = 0;
  std::map<std::array<int64_t, 4>, double> gemm_efficiency_by_shape{};  // calibrated; see GpuSpec
  int sm_count = 0;                                                     // 0: no quantization
  std::vector<std::array<int64_t, 2>> gemm_tiles{};                     // empty: no quantization
  double element_bytes = 2;                                             // bytes of a GEMM operand
  double attention_efficiency = 0;  // the kernel's forward FLOP rate / peak (flash1: FA2's over the speedup)
  // flash1 where the GPU lists its benchmark (GpuSpec::flash1_rates): the rate by mask, head size and sequence length
  // replaces attention_efficiency.
  std::vector<AttentionRateCurve> attention_rates{};
  double attention_backward_factor = 2;       // backward work / forward work (a published pair's FLOP count)
  double attention_backward_time_factor = 2;  // backward time / forward time of the kernel, as measured
  double eager_elementwise_time_factor = 1;   // EagerKernel::unfused ops: time / their bytes' time
  PassFactors layer_norm_time_factor{};       // EagerKernel::layer_norm
  PassFactors gelu_time_factor{};             // EagerKernel::gelu
  EagerScoreBytes eager_score_bytes;          // the eager implementation's (training.attention eager or eager_16bit)
  AttentionImpl attention = AttentionImpl::flash;
  double kernel_launch_s = 0;
  double gemm_fixed_time_s = 0;  // per GEMM kernel, beyond its tiles' work (data/gpus.yaml kernels.gemm_fixed_time)
  // training.fp8: the model an FP8 matmul's GEMMs run under (the GPU's FP8 peak and efficiency, one-byte operands, no
  // calibrated 16-bit shapes); null otherwise.
  std::shared_ptr<const ComputeModel> fp8_gemms;
};

ComputeModel compute_model(const Scenario& scenario);
double forward_seconds(const PlanOp& op, const ComputeModel& model);
double backward_seconds(const PlanOp& op, const ComputeModel& model);
// forward_seconds and backward_seconds of each op, computed once: the executors run an op once per micro-batch (and
// a pipeline's stages thousands of times), its time the same each time.
struct OpSeconds {
  std::vector<double> forward;  // per op, index into the ops given
  std::vector<double> backward;
};
OpSeconds op_seconds(const std::vector<PlanOp>& ops, const ComputeModel& model);
// The FLOPs a GPU runs for one micro-batch of the op's matmuls and attention, forward, recomputed forward and
// backward, with the attention as its kernel computes it (eager: the whole score matrix): hardware FLOPs, the count
// Megatron-LM's papers report (Narayanan et al. 2021 eq. 3 counts the recomputed forward).
double executed_flops(const PlanOp& op, const ComputeModel& model);
double memory_seconds(double bytes, const ComputeModel& model);
// The forward + backward FLOP rate of a published attention benchmark for an attention op: the curve of the op's mask
// whose head size is nearest (a tie: the larger), linear in log2(sequence length) between the benchmarked lengths and
// flat beyond them; nothing when model.attention_rates has no curve for the op's mask.
std::optional<double> published_attention_rate(const PlanOp& op, const ComputeModel& model);
// One GEMM {m, n, k, batch}: a calibrated efficiency for its shape where measured, else the shape model.
double gemm_seconds(const GemmShape& gemm, const ComputeModel& model);
// The fraction of the tiles' work that is useful: the best tile of model.gemm_tiles, whole waves of sm_count.
double gemm_quantization_efficiency(const GemmShape& gemm, const ComputeModel& model);
// The optimizer step: its bytes at HBM bandwidth, or its kernel launches where those take longer.
double optimizer_seconds(const OptimizerStep& step, const ComputeModel& model);

}  // namespace dpsim
