// libFuzzer target: load_topology() on arbitrary bytes (see fuzz_scenario.cpp for what counts as a finding).
#include "dpsim/error.hpp"
#include "dpsim/load.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& file = dpsim_fuzz::sandbox().write(data, size);
  try {
    (void)dpsim::load_topology(file);
  } catch (const dpsim::InputError&) {
  } catch (const dpsim::RuntimeError&) {
  }
  return 0;
}
