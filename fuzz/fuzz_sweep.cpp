// libFuzzer target: load_sweep() on arbitrary bytes, then the first points' scenarios with their overrides (as a
// sweep worker loads them). See fuzz_scenario.cpp for what counts as a finding.
#include <algorithm>
#include <cstdint>

#include "dpsim/error.hpp"
#include "dpsim/sweep_spec.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& file = dpsim_fuzz::sandbox().write(data, size);
  try {
    const dpsim::SweepSpec spec = dpsim::load_sweep(file);
    const auto points = static_cast<int64_t>(std::min(spec.point_count(), 3.0));
    for (int64_t i = 0; i < points; ++i) {
      try {
        (void)dpsim::load_scenario(spec.base, dpsim::sweep_point(spec, i));
      } catch (const dpsim::InputError&) {  // a bad value of one point is that point's error
      }
    }
  } catch (const dpsim::InputError&) {
  } catch (const dpsim::RuntimeError&) {
  }
  return 0;
}
