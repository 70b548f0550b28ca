#pragma once
#include <vector>

#include "dpsim/model.hpp"

namespace dpsim {
std::vector<Op> transformer_ops(const TransformerConfig& config, int64_t sequence_length, double activation_bytes,
                                const TensorSplit& split, double stream_bytes = 0,
                                const EagerElementwise* eager = nullptr);
}
