#pragma once
#include <vector>

#include "dpsim/model.hpp"
#include "dpsim/scenario.hpp"

namespace dpsim {

// Whether a scenario's convolutions run on transposed copies: channels_first activations (PyTorch's default, NCHW)
// and tensor-core convolutions (16-bit compute, or fp32 with TF32), which cuDNN runs in NHWC.
bool transposes_convolutions(const Training& training);

// After each convolution (an op with feature maps), an op for the NCHW <-> NHWC transposes of its cuDNN calls, where
// transposes_convolutions (identity otherwise): `passes_per_call` passes over its input and output feature maps per
// call (data/gpus.yaml kernels.nchw_convolution_transposes), one call forward, one per gradient it computes backward.
std::vector<Op> with_layout_transposes(std::vector<Op> ops, const Training& training, double passes_per_call);

}  // namespace dpsim
