#pragma once
#include <vector>

#include "dpsim/model.hpp"
#include "dpsim/scenario.hpp"

namespace dpsim {

// torch.autocast's weight casts (training.compute_dtype on fp32 parameters; identity otherwise): before each matmul,
// an op that casts its fp32 weights to the compute dtype once per forward and casts their gradient back in its
// backward, holding the 16-bit copy until then.
std::vector<Op> with_autocast_casts(std::vector<Op> ops, const Training& training);

}  // namespace dpsim
