#pragma once
#include <vector>

#include "dpsim/model.hpp"
#include "dpsim/scenario.hpp"

namespace dpsim {

// training.fp8 (identity otherwise): each linear layer's GEMMs in FP8, as Transformer Engine runs them, and before
// each an op for its casts. The output projection to the vocabulary (lm_head) stays in the 16-bit dtype, as
// Megatron-LM's output layer (not a Transformer Engine module) and torchtitan's Float8 conversion (which skips
// "output") leave it.
std::vector<Op> with_fp8_casts(std::vector<Op> ops, const Training& training);

}  // namespace dpsim
