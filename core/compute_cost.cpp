#include "dpsim/compute_cost.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>

namespace dpsim {

namespace {

// training.attention's kernel on this GPU: its forward rate (flash1: the published curve where the GPU lists one, else
// FlashAttention-2's over the speedup; cudnn: its own), its backward time over its forward, eager's score bytes.
void set_attention(AttentionImpl impl, const GpuSpec& g, ComputeModel& m) {
  m.attention = impl;
  m.attention_efficiency = g.attention_efficiency;
  m.attention_backward_factor = g.attention_backward_factor;
  m.attention_backward_time_factor = g.attention_backward_time_factor;
  if (impl == AttentionImpl::flash1) {
    m.attention_efficiency /= g.flash2_speedup_over_flash1;
    m.attention_rates = g.flash1_rates;
  }
  if (impl == AttentionImpl::cudnn) {
    m.attention_efficiency = g.cudnn_attention_efficiency;
    m.attention_backward_time_factor = g.cudnn_attention_backward_time_factor;
  }
  if (is_eager(impl)) m.eager_score_bytes = g.eager_score_bytes.at(impl);
}

}  // namespace

ComputeModel compute_model(const Scenario& s) {
  const GpuSpec& g = s.topology.gpu;
  ComputeModel m;
  m.peak_flops_per_s = s.training.tf32 ? g.peak_tf32_flops_per_s : g.peak_flops_per_s(s.training.compute());
  m.gemm_efficiency = g.gemm_efficiency;
  m.memory_bandwidth_bytes_per_s = g.memory_bandwidth_bytes_per_s;
  m.memory_efficiency = g.memory_efficiency;
  m.gemm_efficiency_by_shape = g.gemm_efficiency_by_shape;
  m.sm_count = g.sm_count;
  m.gemm_tiles = g.gemm_tiles;
  m.element_bytes = dtype_bytes(s.training.compute());
  set_attention(s.training.attention, g, m);
  m.eager_elementwise_time_factor = g.eager_elementwise_time_factor;
  m.layer_norm_time_factor = g.layer_norm_time_factor;
  m.gelu_time_factor = g.gelu_time_factor;
  m.kernel_launch_s = g.kernel_launch_s;
  m.gemm_fixed_time_s = g.gemm_fixed_time_s;
  if (s.training.fp8 && g.peak_fp8_flops_per_s > 0) {
    ComputeModel f = m;
    f.peak_flops_per_s = g.peak_fp8_flops_per_s;
    f.gemm_efficiency = g.fp8_gemm_efficiency > 0 ? g.fp8_gemm_efficiency : g.gemm_efficiency;
    f.gemm_efficiency_by_shape.clear();  // calibrated in 16 bits
    f.element_bytes = 1;
    m.fp8_gemms = std::make_shared<const ComputeModel>(std::move(f));
  }
  return m;
}

double memory_seconds(double bytes, const ComputeModel& m) {
  return bytes / (m.memory_bandwidth_bytes_per_s * m.memory_efficiency);
}

namespace {

double gemm_flops(const GemmShape& g) {
  return 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k) *
         static_cast<double>(g.batch);
}

double ceil_div(int64_t a, int64_t b) { return std::ceil(static_cast<double>(a) / static_cast<double>(b)); }

// Backward of Y = X W: dX = dY W^T (m x k, inner n) and dW = X^T dY (k x n, inner m), each where wanted.
std::vector<GemmShape> backward_gemms(const GemmShape& g, bool input_grad = true, bool weight_grad = true) {
  std::vector<GemmShape> out;
  if (input_grad) out.push_back({g.m, g.k, g.n, g.batch});
  if (weight_grad) out.push_back({g.k, g.n, g.m, g.batch});
  return out;
}

double launch_floor(double seconds, double kernels, const ComputeModel& m) {
  return std::max(seconds, kernels * m.kernel_launch_s);
}

// A calibrated efficiency (measure --calibrate timed the whole kernel) or nothing.
std::optional<double> calibrated_seconds(const GemmShape& g, const ComputeModel& m) {
  const auto it = m.gemm_efficiency_by_shape.find({g.m, g.n, g.k, g.batch});
  if (it == m.gemm_efficiency_by_shape.end() || it->second <= 0) return std::nullopt;
  return gemm_flops(g) / (m.peak_flops_per_s * it->second);
}

double quantized_seconds(const GemmShape& g, const ComputeModel& m) {
  return gemm_flops(g) / (m.peak_flops_per_s * m.gemm_efficiency * gemm_quantization_efficiency(g, m));
}

// The tiles' work (never faster than `floor_bytes` through HBM) plus the kernel's fixed time.
double modelled_seconds(const GemmShape& g, double floor_bytes, const ComputeModel& m) {
  if (auto t = calibrated_seconds(g, m)) return *t;
  return m.gemm_fixed_time_s + std::max(quantized_seconds(g, m), memory_seconds(floor_bytes, m));
}

// The GEMMs of a matmul op, scaled to the op's FLOPs where the two differ (a layer whose listed shape is
// per sample but whose FLOPs are not, e.g. BERT's pooler on one token); with no shape, at the ceiling. Where
// the op states its own bytes (a layer list's convolution: an implicit GEMM reads feature maps, not the im2col
// matrix its shape describes), those bound it; else each GEMM's operands do.
double gemms_seconds(const PlanOp& op, double flops, double stated_bytes, bool backward, const ComputeModel& m) {
  const bool stated = stated_bytes > 0;
  double t = 0, f = 0;
  for (const GemmShape& g : op.gemms) {
    for (const GemmShape& one :
         backward ? backward_gemms(g, op.input_grad, op.weight_grad) : std::vector<GemmShape>{g}) {
      t += stated ? modelled_seconds(one, 0, m) : gemm_seconds(one, m);
      f += gemm_flops(one);
    }
  }
  t = f > 0 ? t * flops / f : flops / (m.peak_flops_per_s * m.gemm_efficiency);
  return std::max(t, memory_seconds(stated_bytes, m));
}

double score_elements(const PlanOp& op) {
  if (op.gemms.empty()) return 0;
  const GemmShape& s = op.gemms.front();  // scores = Q K^T: m x n per head
  return static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.batch);
}

// Eager attention's dropout on the probabilities: forward reads them and writes the result and a one-byte (bool)
// mask; backward reads the gradient and the mask and writes the gradient. FlashAttention fuses it into its kernel.
double score_dropout_bytes(const PlanOp& op, const ComputeModel& m) {
  return op.score_dropout ? 2.0 * m.element_bytes + 1.0 : 0.0;
}

double attention_forward_seconds(const PlanOp& op, const ComputeModel& m) {
  if (is_eager(m.attention)) {
    // Eager computes the whole score matrix (the mask does not skip work) and moves it through HBM.
    double t = memory_seconds(score_elements(op) * (m.eager_score_bytes.forward + score_dropout_bytes(op, m)), m);
    for (const GemmShape& g : op.gemms) t += gemm_seconds(g, m);
    return t;
  }
  // A published rate is for forward and backward together; the backward takes attention_backward_factor times the
  // forward, as the benchmark's FLOP count has it, so the pair runs at that rate.
  if (auto rate = published_attention_rate(op, m)) return op.forward_flops / *rate;
  const double eff = m.attention_efficiency > 0 ? m.attention_efficiency : m.gemm_efficiency;
  return op.forward_flops / (m.peak_flops_per_s * eff);
}

double attention_backward_seconds(const PlanOp& op, const ComputeModel& m) {
  if (is_eager(m.attention)) {
    double t = memory_seconds(score_elements(op) * (m.eager_score_bytes.backward + score_dropout_bytes(op, m)), m);
    for (const GemmShape& g : op.gemms)
      for (const GemmShape& b : backward_gemms(g)) t += gemm_seconds(b, m);
    return t;
  }
  // A published forward + backward rate: the pair at that rate, split by the benchmark's FLOP count. Otherwise the
  // forward at attention_efficiency and the backward as much longer as the kernel's was measured.
  const double factor =
      published_attention_rate(op, m) ? m.attention_backward_factor : m.attention_backward_time_factor;
  return factor * attention_forward_seconds(op, m);
}

double eager_time_factor(EagerKernel kernel, bool backward, const ComputeModel& m) {
  const auto pass = [backward](const PassFactors& f) { return backward ? f.backward : f.forward; };
  switch (kernel) {
    case EagerKernel::none: return 1;
    case EagerKernel::unfused: return m.eager_elementwise_time_factor;
    case EagerKernel::layer_norm: return pass(m.layer_norm_time_factor);
    case EagerKernel::gelu: return pass(m.gelu_time_factor);
  }
  return 1;
}

// An elementwise or embedding op's bytes through HBM; eager PyTorch's kernels (unfused ops' strided copies,
// broadcasts and complex numbers, not vectorized; LayerNorm's row and column reductions) as much slower as they were
// measured. The copy of its gradients into the DDP bucket is a copy kernel of its own.
double elementwise_seconds(const PlanOp& op, bool backward, const ComputeModel& m) {
  const double copy = backward ? op.grad_copy_bytes : 0.0;
  const double own = memory_seconds((backward ? op.backward_bytes : op.forward_bytes) - copy, m);
  return own * eager_time_factor(op.eager_kernel, backward, m) + memory_seconds(copy, m);
}

// The model a matmul's GEMMs run under: FP8's where the op runs in FP8 (training.fp8).
const ComputeModel& gemm_model(const PlanOp& op, const ComputeModel& m) {
  return op.fp8 && m.fp8_gemms ? *m.fp8_gemms : m;
}

// Kernels an op launches: one per GEMM (at least one) forward, twice that backward (dX and dW).
double forward_kernels(const PlanOp& op) { return static_cast<double>(std::max<size_t>(1, op.gemms.size())); }

}  // namespace

std::optional<double> published_attention_rate(const PlanOp& op, const ComputeModel& m) {
  if (op.kind != OpKind::attention || op.gemms.empty()) return std::nullopt;
  const GemmShape& scores = op.gemms.front();  // Q K^T: sequence x sequence, inner the head size
  const AttentionRateCurve* best = nullptr;
  for (const AttentionRateCurve& c : m.attention_rates) {
    if (c.causal != op.causal || c.rate_by_sequence.empty()) continue;
    const auto gap = [&](const AttentionRateCurve& x) { return std::abs(x.head_dim - scores.k); };
    if (!best || gap(c) < gap(*best) || (gap(c) == gap(*best) && c.head_dim > best->head_dim)) best = &c;
  }
  if (!best) return std::nullopt;
  const auto& pts = best->rate_by_sequence;
  const double seq = static_cast<double>(scores.m);
  if (seq <= static_cast<double>(pts.front().first)) return pts.front().second;
  for (size_t i = 1; i < pts.size(); ++i) {
    const auto lo = static_cast<double>(pts[i - 1].first), hi = static_cast<double>(pts[i].first);
    if (seq > hi) continue;
    const double w = std::log2(seq / lo) / std::log2(hi / lo);
    return pts[i - 1].second + w * (pts[i].second - pts[i - 1].second);
  }
  return pts.back().second;
}

double gemm_quantization_efficiency(const GemmShape& g, const ComputeModel& m) {
  if (m.sm_count <= 0 || m.gemm_tiles.empty() || g.m <= 0 || g.n <= 0) return 1.0;
  const double useful = static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.batch);
  const auto sms = static_cast<double>(m.sm_count);
  double best = 0;
  for (const auto& [tm, tn] : m.gemm_tiles) {
    const double tiles = ceil_div(g.m, tm) * ceil_div(g.n, tn) * static_cast<double>(g.batch);
    // Fewer tiles than SMs: cuBLAS splits the inner dimension across CTAs (split-K), each part at least as deep
    // as the tile is wide, so a small output with a long inner dimension (a weight gradient) still fills the GPU.
    const double depth = static_cast<double>(std::max(tm, tn));
    const double splits =
        std::max(1.0, std::min(std::floor(sms / tiles), std::floor(static_cast<double>(g.k) / depth)));
    const double waves = std::ceil(tiles * splits / sms);
    best = std::max(best, std::min(1.0, useful * splits / (waves * sms * static_cast<double>(tm * tn))));
  }
  return best;
}

double gemm_seconds(const GemmShape& g, const ComputeModel& m) {
  const double operands =
      (static_cast<double>(g.m) * static_cast<double>(g.k) + static_cast<double>(g.k) * static_cast<double>(g.n) +
       static_cast<double>(g.m) * static_cast<double>(g.n)) *
      static_cast<double>(g.batch) * m.element_bytes;
  return modelled_seconds(g, operands, m);
}

double forward_seconds(const PlanOp& op, const ComputeModel& m) {
  double t = 0;
  switch (op.kind) {
    case OpKind::matmul: t = gemms_seconds(op, op.forward_flops, op.forward_bytes, false, gemm_model(op, m)); break;
    case OpKind::attention: t = attention_forward_seconds(op, m) + memory_seconds(op.forward_bytes, m); break;
    case OpKind::elementwise:
    case OpKind::embedding:
      if (op.forward_bytes <= 0 && op.forward_flops <= 0) return 0;  // nothing to do forward: no kernel
      t = std::max(op.forward_flops / (m.peak_flops_per_s * m.gemm_efficiency), elementwise_seconds(op, false, m));
      break;
  }
  return launch_floor(t, forward_kernels(op), m);
}

double backward_seconds(const PlanOp& op, const ComputeModel& m) {
  if (!op.input_grad && !op.weight_grad) return 0;  // outside the autograd graph (core/trainable.cpp)
  double t = 0;
  // Kernels: dX and dW per GEMM (a matmul: those wanted), at least one each.
  double kernels = 2 * forward_kernels(op);
  switch (op.kind) {
    case OpKind::matmul:
      kernels = forward_kernels(op) * ((op.input_grad ? 1 : 0) + (op.weight_grad ? 1 : 0));
      t = gemms_seconds(op, op.backward_flops, op.backward_bytes - op.grad_copy_bytes, true, gemm_model(op, m)) +
          memory_seconds(op.grad_copy_bytes + (op.weight_grad ? op.bias_grad_bytes : 0.0), m);
      break;
    case OpKind::attention: t = attention_backward_seconds(op, m) + memory_seconds(op.backward_bytes, m); break;
    case OpKind::elementwise:
    case OpKind::embedding:
      t = std::max(op.backward_flops / (m.peak_flops_per_s * m.gemm_efficiency), elementwise_seconds(op, true, m));
      break;
  }
  const double own = launch_floor(t, kernels, m);
  return op.recompute_forward ? own + forward_seconds(op, m) : own;  // activation checkpointing (core/plan.cpp)
}

OpSeconds op_seconds(const std::vector<PlanOp>& ops, const ComputeModel& m) {
  OpSeconds out;
  out.forward.reserve(ops.size());
  out.backward.reserve(ops.size());
  for (const PlanOp& op : ops) {
    out.forward.push_back(forward_seconds(op, m));
    out.backward.push_back(backward_seconds(op, m));
  }
  return out;
}

double executed_flops(const PlanOp& op, const ComputeModel& m) {
  if (op.kind != OpKind::matmul && op.kind != OpKind::attention) return 0;
  double forward = op.forward_flops;
  if (op.kind == OpKind::attention && is_eager(m.attention)) {  // the whole score matrix, masked or not
    forward = 0;
    for (const GemmShape& g : op.gemms) forward += gemm_flops(g);
  }
  const double backward = op.kind == OpKind::attention && is_eager(m.attention) ? 2 * forward : op.backward_flops;
  return forward * (op.recompute_forward ? 2 : 1) + backward;
}

double optimizer_seconds(const OptimizerStep& step, const ComputeModel& m) {
  return launch_floor(memory_seconds(step.bytes, m), step.kernels, m);
}

}  // namespace dpsim
