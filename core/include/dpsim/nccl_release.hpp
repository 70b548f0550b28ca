#pragma once
// NCCL's tuning constants by release (data/nccl.yaml releases): which table a release uses and the model with it.
// Rule: a release X.Y.Z from the oldest listed table up to the model's nccl_version uses the newest table listed at
// or below it; the top-level constants are nccl_version's. Anything else is refused.
#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "dpsim/scenario.hpp"

namespace dpsim {

// "2.18.5" -> {2, 18, 5}; nullopt for anything that is not three dot-separated whole numbers.
std::optional<std::array<int, 3>> parse_nccl_release(std::string_view text);

// The model with the tuning tables of `release` applied (tuning_release names the table). InputError (a message
// without file or line; callers add where the release was written) for text that is not a release, or a release
// outside the tables' range.
NcclModel nccl_for_release(const NcclModel& model, const std::string& release);

}  // namespace dpsim
