// libFuzzer target: load_model() on arbitrary bytes, then the model zoo math on what loaded (parameter
// count), which must neither overflow nor throw (see fuzz_scenario.cpp for what counts as a finding).
#include "dpsim/error.hpp"
#include "dpsim/load.hpp"
#include "dpsim/model.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& file = dpsim_fuzz::sandbox().write(data, size);
  try {
    const dpsim::ModelSpec model = dpsim::load_model(file);
    (void)dpsim::count_parameters(model);
  } catch (const dpsim::InputError&) {
  } catch (const dpsim::RuntimeError&) {
  }
  return 0;
}
