#include "dpsim/model.hpp"

#include "dpsim/error.hpp"
#include "model_internal.hpp"

namespace dpsim {

const char* to_string(OpKind kind) {
  switch (kind) {
    case OpKind::matmul: return "matmul";
    case OpKind::attention: return "attention";
    case OpKind::elementwise: return "elementwise";
    case OpKind::embedding: return "embedding";
  }
  return "?";
}

namespace {

// An explicit layer list (non-transformer nets): each layer owns its listed tensors (or one, NAME.weight); backward is
// twice the forward FLOPs; a layer's `memory` passes give its bytes.
std::vector<Op> layer_list_ops(const std::vector<ExplicitLayer>& layers, double act_bytes) {
  std::vector<Op> ops;
  for (const auto& l : layers) {
    Op op;
    op.name = l.name;
    op.kind = l.gemm ? OpKind::matmul : OpKind::elementwise;
    for (const auto& t : l.tensors) op.params.push_back({t.name, t.numel});
    if (l.tensors.empty() && l.parameters > 0) op.params.push_back({l.name + ".weight", l.parameters});
    op.forward_flops_per_sample = l.forward_flops_per_sample;
    op.backward_flops_per_sample = 2.0 * l.forward_flops_per_sample;
    if (l.gemm) op.gemms.push_back(*l.gemm);
    op.forward_bytes_per_sample = l.memory_elements_per_sample * l.forward_passes * act_bytes;
    op.backward_bytes_per_sample = l.memory_elements_per_sample * l.backward_passes * act_bytes;
    op.activation_bytes_per_sample = l.activation_elements_per_sample * act_bytes;
    if (l.convolution) op.feature_map_bytes_per_sample = l.memory_elements_per_sample * act_bytes;
    ops.push_back(std::move(op));
  }
  return ops;
}

}  // namespace

std::vector<Op> build_ops(const ModelSpec& model, int64_t sequence_length, Dtype activation_dtype,
                          const TensorSplit& split, std::optional<Dtype> stream_dtype, const EagerElementwise* eager) {
  if (model.transformer)
    return transformer_ops(*model.transformer, sequence_length, dtype_bytes(activation_dtype), split,
                           stream_dtype ? dtype_bytes(*stream_dtype) : 0, eager);
  if (split.degree > 1 || split.context > 1)
    throw RuntimeError("tensor and context parallelism need a transformer model");
  return layer_list_ops(model.layers, dtype_bytes(activation_dtype));
}

int64_t count_parameters(const ModelSpec& model) {
  int64_t total = 0;
  for (const auto& op : build_ops(model, 1, Dtype::bf16)) {
    for (const auto& p : op.params) total += p.numel;
  }
  return total;
}

std::vector<ParameterGroup> parameter_breakdown(const ModelSpec& model) {
  std::vector<ParameterGroup> out;
  for (const auto& op : build_ops(model, 1, Dtype::bf16)) {
    for (const auto& p : op.params) out.push_back({p.name, p.numel});
  }
  return out;
}

}  // namespace dpsim
