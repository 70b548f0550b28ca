// libFuzzer target: parse_nccl_tests_log() on arbitrary text, as dpsim calibrate reads an all_reduce_perf log.
// See fuzz_scenario.cpp for what counts as a finding.
#include <string>

#include "dpsim/backend/calibration.hpp"
#include "dpsim/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    (void)dpsim::backend::parse_nccl_tests_log(text, "fuzz.log");
  } catch (const dpsim::InputError&) {
  } catch (const dpsim::RuntimeError&) {
  }
  return 0;
}
