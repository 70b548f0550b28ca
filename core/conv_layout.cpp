#include "dpsim/conv_layout.hpp"

namespace dpsim {

namespace {

// The transposes as an elementwise op of their own: memory-bound kernels beside the convolution's, run while its
// backward runs (either gradient wanted), holding nothing from forward to backward (cuDNN's NHWC copies are
// transient).
Op transposes(const Op& conv, double passes_per_call) {
  const double per_call = passes_per_call * conv.feature_map_bytes_per_sample;
  Op op;
  op.name = conv.name + ".nchw_transposes";
  op.kind = OpKind::elementwise;
  op.forward_bytes_per_sample = per_call;
  op.backward_bytes_per_sample = per_call * ((conv.input_grad ? 1 : 0) + (conv.weight_grad ? 1 : 0));
  op.input_grad = conv.input_grad || conv.weight_grad;
  op.weight_grad = false;
  return op;
}

}  // namespace

bool transposes_convolutions(const Training& t) {
  return t.memory_format == MemoryFormat::channels_first && (t.tf32 || dtype_bytes(t.compute()) <= 2);
}

std::vector<Op> with_layout_transposes(std::vector<Op> ops, const Training& training, double passes_per_call) {
  if (!transposes_convolutions(training) || passes_per_call <= 0) return ops;
  std::vector<Op> out;
  out.reserve(2 * ops.size());
  for (Op& op : ops) {
    out.push_back(std::move(op));
    if (out.back().feature_map_bytes_per_sample > 0) {
      Op t = transposes(out.back(), passes_per_call);
      out.push_back(std::move(t));
    }
  }
  return out;
}

}  // namespace dpsim
