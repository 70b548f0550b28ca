#include "dpsim/fp8.hpp"

#include <cmath>

namespace dpsim {

namespace {

// Transformer Engine's quantizers (transformer_engine/pytorch/module/linear.py): the input is quantized with
// `input_quantizer.set_usage(rowwise=True, columnwise=backward_needs_input ...)`, the FP8 copy the forward GEMM reads
// and the transposed one the weight gradient reads; the weight likewise (rowwise for the forward, columnwise for the
// input gradient); in the backward, the output gradient (rowwise for dX, columnwise for dW). One cast kernel reads the
// 16-bit tensor once and writes each FP8 copy: 2 + 1 + 1 bytes per element.
constexpr double kFp8CopyBytes = 1;
double cast_bytes(Dtype from) { return dtype_bytes(from) + 2 * kFp8CopyBytes; }

// The elements of one operand of each of the matmul's GEMMs, summed: X (m x k, per sample), Y (m x n, per sample) or
// W (k x n).
template <class Operand>
double elements(const Op& op, Operand operand) {
  double n = 0;
  for (const GemmShape& g : op.gemms) n += operand(g) * static_cast<double>(g.batch);
  return n;
}
double input_elements_per_sample(const Op& op) {
  return elements(op, [](const GemmShape& g) { return static_cast<double>(g.m) * static_cast<double>(g.k); });
}
double output_elements_per_sample(const Op& op) {
  return elements(op, [](const GemmShape& g) { return static_cast<double>(g.m) * static_cast<double>(g.n); });
}
double weight_elements(const Op& op) {
  return elements(op, [](const GemmShape& g) { return static_cast<double>(g.k) * static_cast<double>(g.n); });
}

// Before the matmul, the forward's casts of its input (per sample) and weight (once per micro-batch); nothing to do in
// the backward.
Op forward_casts(const Op& matmul, const Training& t) {
  Op op;
  op.name = matmul.name + ".fp8_casts";
  op.kind = OpKind::elementwise;
  op.forward_bytes_per_sample = input_elements_per_sample(matmul) * cast_bytes(t.compute());
  op.forward_fixed_bytes = weight_elements(matmul) * cast_bytes(t.param_dtype);
  op.input_grad = op.weight_grad = false;
  return op;
}

// After the matmul in the forward order, so that its backward (the output gradient's cast) runs before the matmul's.
Op gradient_cast(const Op& matmul, const Training& t) {
  Op op;
  op.name = matmul.name + ".fp8_grad_cast";
  op.kind = OpKind::elementwise;
  op.input_grad = matmul.input_grad || matmul.weight_grad;
  op.weight_grad = false;
  op.backward_bytes_per_sample = op.input_grad ? output_elements_per_sample(matmul) * cast_bytes(t.compute()) : 0;
  return op;
}

bool runs_in_fp8(const Op& op) { return op.kind == OpKind::matmul && !op.gemms.empty() && op.name != "lm_head"; }

}  // namespace

std::vector<Op> with_fp8_casts(std::vector<Op> ops, const Training& training) {
  if (!training.fp8) return ops;
  std::vector<Op> out;
  out.reserve(3 * ops.size());
  for (Op& op : ops) {
    if (!runs_in_fp8(op)) {
      out.push_back(std::move(op));
      continue;
    }
    op.fp8 = true;
    // What the matmul keeps for its weight gradient is the FP8 copy of its input, not the 16-bit input: Transformer
    // Engine saves the quantized input and drops its row-wise data ("Discard row-wise data since it is not needed in
    // backward pass", inputmat.update_usage(rowwise_usage=False, columnwise_usage=True); saved_inputmat = inputmat:
    // transformer_engine/pytorch/module/linear.py:616-621 at d0067d0).
    op.activation_bytes_per_sample *= kFp8CopyBytes / dtype_bytes(training.compute());
    // Its sequence-parallel all-gathers move the FP8 copies: Transformer Engine quantizes before it gathers (linear.py
    // at d0067d0: the input :398-411 in the forward, :993-998 again in the backward, the output gradient :1156-1160;
    // base.py:335 "AllGather buffers use fp8 when using fp8 recipe" with userbuffers). The reduce-scatters stay 16-bit.
    for (TensorComm& c : op.tensor_comms)
      if (c.kind == CollectiveKind::all_gather) c.bytes_per_sample *= kFp8CopyBytes / dtype_bytes(training.compute());
    out.push_back(forward_casts(op, training));
    Op after = gradient_cast(op, training);
    out.push_back(std::move(op));
    out.push_back(std::move(after));
  }
  return out;
}

}  // namespace dpsim
