// The compute- vs communication-bound threshold: one constant (kCommBoundShare), the one docs/guide.md states.
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <utility>

#include "../source_dir.hpp"
#include "dpsim/advice.hpp"
#include "dpsim/estimate.hpp"
#include "dpsim/load.hpp"
#include "dpsim/sweep_spec.hpp"
#include "dpsim/units.hpp"

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

TEST_CASE("when even zero3 does not fit, the advice says by how much and the smallest cluster that fits") {
  Scenario s = load_scenario(src("scenarios/llama3.1-70b-64xh100-ib.yaml"), {{"cluster.nodes", "1"}});
  const StepResult r = evaluate(s);
  REQUIRE_FALSE(r.fits);
  const std::string text = advise(s, r, evaluate).at(0);
  // zero3 on 8 GPUs, and its shortfall, from the memory model itself.
  Scenario z = s;
  z.parallelism.sharding = Sharding::zero3;
  StepResult z3;
  fill_common(z, make_step_plan(z), z3);
  CHECK(text.find("None fits: zero3 is short by " + format_bytes(z3.memory_need_bytes() - z3.gpu_memory_bytes)) !=
        std::string::npos);
  // Its activations alone exceed an H100, so more GPUs help only with full recomputation: from 4 nodes, not 2.
  CHECK(z3.activation_bytes_per_gpu > z3.gpu_memory_bytes);
  CHECK(text.find("zero3 with full checkpointing fits from 4 nodes (32 GPUs).") != std::string::npos);
  z.training.activation_checkpointing = ActivationCheckpointing::full;
  for (const auto& [nodes, fits] : {std::pair{2, false}, std::pair{4, true}}) {
    z.topology.nodes = nodes;
    StepResult m;
    fill_common(z, make_step_plan(z), m);
    CHECK(m.fits == fits);
  }
}
