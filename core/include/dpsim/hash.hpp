#pragma once
// The content hash dpsim records wherever it names an input by identity (calibrations, measured
// scenarios, a sweep's inputs): 64-bit FNV-1a, printed "fnv1a64:<16 hex digits>".
#include <string>
#include <string_view>

namespace dpsim {

std::string fnv1a64(std::string_view text);

}  // namespace dpsim
