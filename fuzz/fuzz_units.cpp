// libFuzzer target: the units parser. std::invalid_argument is the only allowed failure; a parsed value
// must be finite; formatting any parsed value must not fail.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include "dpsim/units.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (auto parse :
       {dpsim::parse_bytes, dpsim::parse_bandwidth_bytes_per_s, dpsim::parse_seconds, dpsim::parse_flops_per_s}) {
    try {
      const double v = parse(text);
      if (!std::isfinite(v)) std::abort();  // a unit parser must never hand out inf or NaN
      (void)dpsim::format_bytes(v);
      (void)dpsim::format_bandwidth(v);
      (void)dpsim::format_seconds(v);
      (void)dpsim::format_count(v);
    } catch (const std::invalid_argument&) {
    }
  }
  return 0;
}
