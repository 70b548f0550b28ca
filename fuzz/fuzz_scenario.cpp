// libFuzzer target: load_scenario() on arbitrary bytes, then the pure core steps on what loaded (step plan,
// closed-form estimate, result JSON). Bad input must end as an InputError (or a RuntimeError of the
// environment); any other exception, a crash, a hang or a sanitizer report is a finding.
#include "dpsim/error.hpp"
#include "dpsim/estimate.hpp"
#include "dpsim/load.hpp"
#include "dpsim/plan.hpp"
#include "dpsim/result.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& file = dpsim_fuzz::sandbox().write(data, size);
  try {
    const dpsim::Scenario scenario = dpsim::load_scenario(file);
    const dpsim::StepPlan plan = dpsim::make_step_plan(scenario);
    (void)dpsim::estimate(scenario, plan);
  } catch (const dpsim::InputError&) {
  } catch (const dpsim::RuntimeError&) {
  }
  return 0;
}
