// The fast fidelity (bucket-granularity flows on the symmetry-reduced platform) agrees with the step
// fidelity (every NCCL ring step as messages on the full platform) within 0.5% on every shipped
// scenario with at most 64 GPUs.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "../source_dir.hpp"
#include "dpsim/load.hpp"
#include "dpsim/sim/simulate.hpp"

using namespace dpsim;

namespace {

void compare(const std::filesystem::path& file) {
  const Scenario s = load_scenario(file);
  if (s.world_size() > 64) return;
  const StepPlan plan = make_step_plan(s);
  SimOptions fast;
  fast.progress = false;
  SimOptions step = fast;
  step.fidelity = Fidelity::step;
  step.max_events = 1e8;  // the 64-GPU 70B scenario is ~6e6 events
  const StepResult a = simulate(s, plan, fast);
  const StepResult b = simulate(s, plan, step);
  const double err = std::abs(a.step_time_s - b.step_time_s) / b.step_time_s;
  const double comm_err = b.comm_busy_s > 0 ? std::abs(a.comm_busy_s - b.comm_busy_s) / b.comm_busy_s : 0;
  std::cout << file.filename().string() << ": step " << a.step_time_s << " s (fast) vs " << b.step_time_s
            << " s (step), error " << 100 * err << "%; communication busy error " << 100 * comm_err << "%\n";
  INFO(file.string());
  CHECK(err < 0.005);
  CHECK(comm_err < 0.005);
}

}  // namespace

TEST_CASE("fast fidelity agrees with step fidelity on shipped scenarios with n <= 64", "[sim][fidelity]") {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(DPSIM_SOURCE_DIR) / "scenarios"))
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  REQUIRE(!files.empty());
  for (const auto& f : files) compare(f);
}
