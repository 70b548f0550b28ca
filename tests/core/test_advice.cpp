// The compute- vs communication-bound threshold: one constant (kCommBoundShare), the one docs/guide.md states.
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "../source_dir.hpp"
#include "dpsim/advice.hpp"
#include "dpsim/estimate.hpp"
#include "dpsim/load.hpp"

using namespace dpsim;

namespace {

std::string src(const std::string& rel) { return std::string(DPSIM_SOURCE_DIR) + "/" + rel; }

StepResult evaluate(const Scenario& s) { return estimate(s, make_step_plan(s)).result; }

// The first advice sentence for `r` with its exposed communication set to `share` of the step.
std::string verdict(const Scenario& s, StepResult r, double share) {
  r.exposed_comm_s = share * r.step_time_s;
  return advise(s, r, evaluate).at(0);
}

}  // namespace

TEST_CASE("docs/guide.md states the threshold the advice uses") {
  std::ifstream in(src("docs/guide.md"));
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  std::string guide = text.str();
  for (char& c : guide)
    if (c == '\n') c = ' ';
  std::smatch m;
  const std::regex sentence(R"(exposed communication is more than\s+([0-9.]+)% of the\s+step)");
  REQUIRE(std::regex_search(guide, m, sentence));
  CHECK(std::stod(m[1].str()) == Approx(100.0 * kCommBoundShare));
}

TEST_CASE("the advice turns to the network just above the threshold, not below it") {
  const Scenario s = load_scenario(src("scenarios/gpt2-1.5b-16xh100-ib.yaml"));
  const StepResult r = evaluate(s);
  CHECK_THAT(verdict(s, r, kCommBoundShare * 0.99), Catch::StartsWith("Compute-bound"));
  CHECK_THAT(verdict(s, r, kCommBoundShare * 1.01), Catch::StartsWith("Communication-bound"));
}

TEST_CASE("estimate's advice names its figures as the perfect-overlap bound, beside the no-overlap bound") {
  const Scenario s = load_scenario(src("scenarios/gpt2-1.5b-16xh100-ib.yaml"));
  const StepResult r = evaluate(s);
  REQUIRE(r.bounds);
  const std::string first = advise(s, r, evaluate).at(0);
  CHECK_THAT(first, Catch::Contains("perfect-overlap bound") && Catch::Contains("with no overlap"));
}
