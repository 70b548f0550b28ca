#include "dpsim/autocast.hpp"

namespace dpsim {

namespace {

// The weights a matmul reads: its tensors, or (a tied head, which owns none) the k x n operand of its GEMMs.
double weight_elements(const Op& op) {
  double n = 0;
  for (const ParamTensor& p : op.params) n += static_cast<double>(p.numel);
  if (n > 0) return n;
  for (const GemmShape& g : op.gemms)
    n += static_cast<double>(g.k) * static_cast<double>(g.n) * static_cast<double>(g.batch);
  return n;
}

// Autocast casts an fp32 weight once per forward: its cache keeps the casts of leaf tensors that require grad, the
// parameters (aten/src/ATen/autocast_mode.cpp cached_cast: "cache lower_precision_fp casts of fp32 model weights
// (leaves)"), until the autocast region exits; the matmul keeps the copy for its input gradient. Forward reads fp32
// and writes the copy; backward, the cast's gradient (ToCopyBackward) reads the 16-bit weight gradient and writes fp32.
Op weight_cast(const Op& matmul, const Training& t) {
  const double w = weight_elements(matmul);
  const double bytes = w * (dtype_bytes(t.param_dtype) + dtype_bytes(t.compute()));
  Op op;
  op.name = matmul.name + ".autocast_weight";
  op.kind = OpKind::elementwise;
  op.forward_fixed_bytes = bytes;
  op.backward_fixed_bytes = bytes;
  op.weight_copy_bytes = w * dtype_bytes(t.compute());
  op.input_grad = matmul.weight_grad;  // its backward is the weight gradient's cast
  op.weight_grad = false;
  return op;
}

}  // namespace

std::vector<Op> with_autocast_casts(std::vector<Op> ops, const Training& training) {
  if (!training.autocast()) return ops;
  std::vector<Op> out;
  out.reserve(2 * ops.size());
  for (Op& op : ops) {
    if (op.kind == OpKind::matmul) out.push_back(weight_cast(op, training));
    out.push_back(std::move(op));
  }
  return out;
}

}  // namespace dpsim
