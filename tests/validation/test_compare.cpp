#include <algorithm>
#include <catch2/catch.hpp>

#include "dpsim/validation/compare.hpp"

using namespace dpsim;
using namespace dpsim::validation;

namespace {
StepResult result(double scale) {
  StepResult r;
  r.scenario = std::string(1, 's');
  r.forward_s = 0.100 * scale;
  r.backward_s = 0.200 * scale;
  r.exposed_comm_s = 0.010 * scale;
  r.optimizer_s = 0.020 * scale;
  r.step_time_s = 0.330 * scale;
  for (int i = 0; i < 3; ++i)
    r.buckets.push_back({i, 1 << 20, 0.1 * i * scale, 0.1 * i * scale, (0.1 * i + 0.05) * scale, "ring", "simple"});
  return r;
}
}  // namespace

TEST_CASE("relative errors and their statistics") {
  CHECK(relative_error(110, 100) == Approx(0.10));
  CHECK(relative_error(90, 100) == Approx(-0.10));
  CHECK(relative_error(0, 0) == 0);
  CHECK(std::isinf(relative_error(1, 0)));
  CHECK(relative_error_to_range(367, 365, 370) == 0);
  CHECK(relative_error_to_range(400, 365, 370) == Approx(30.0 / 370));
  CHECK(relative_error_to_range(350, 365, 370) == Approx(-15.0 / 365));
  const ErrorStats s = error_stats({0.01, -0.03, 0.02, -0.10});
  CHECK(s.count == 4);
  CHECK(s.median_abs == Approx(0.025));
  CHECK(s.worst_abs == Approx(0.10));
  CHECK(s.mean_signed == Approx(-0.025));
}

TEST_CASE("identical results pass; a 20% slower measurement fails at 10%") {
  const StepResult p = result(1.0);
  Comparison same = compare(p, p, 0.10);
  CHECK(same.pass);
  CHECK(same.phases.size() == 5);
  CHECK(same.buckets.size() == 6);
  Comparison slow = compare(p, result(1.2), 0.10);
  CHECK_FALSE(slow.pass);
  CHECK(slow.phases[4].name == "step");
  CHECK(slow.phases[4].rel_error == Approx(1.0 / 1.2 - 1.0));
  CHECK_FALSE(slow.phases[4].within);
  Comparison loose = compare(p, result(1.2), 0.25);
  CHECK(loose.pass);
  CHECK(render_comparison(slow).find("Verdict: FAIL") != std::string::npos);
  CHECK(render_comparison(loose).find("Verdict: PASS") != std::string::npos);
}

TEST_CASE("small phases are judged against 5% of the measured step") {
  StepResult p = result(1.0), m = result(1.0);
  p.exposed_comm_s = 0.001;  // measured 10 ms, miss of 9 ms: 9 / max(10, 16.5) = 55%: outside 10%
  m.exposed_comm_s = 0.0;    // 1 ms vs 0: judged 1 / 16.5 ms = 6%: within
  const Comparison c = compare(p, m, 0.10);
  CHECK(c.phases[2].within);
  CHECK(std::isinf(c.phases[2].rel_error));
}

TEST_CASE("bucket count mismatch fails and is noted") {
  StepResult p = result(1.0), m = result(1.0);
  m.buckets.pop_back();
  const Comparison c = compare(p, m, 0.10);
  CHECK_FALSE(c.pass);
  REQUIRE_FALSE(c.notes.empty());
}

TEST_CASE("tolerance: explicit, then context, then scenario, then 0.10") {
  StepResult p = result(1.0), m = result(1.0);
  std::string from;
  CHECK(pick_tolerance(0.2, p, m, 0.05, &from) == 0.2);
  CHECK(from == "--tolerance");
  CHECK(pick_tolerance(std::nullopt, p, m, 0.05, &from) == 0.05);
  m.context["validation"] = {{"tolerance", 0.07}};
  CHECK(pick_tolerance(std::nullopt, p, m, 0.05, &from) == 0.07);
  CHECK(from == "measured context");
  CHECK(pick_tolerance(std::nullopt, p, result(1.0), std::nullopt, &from) == 0.10);
}

namespace {
StepResult with_comms(double scale, bool reversed) {
  StepResult r = result(scale);
  r.buckets.clear();
  // An FSDP-like step: two all-gathers and a reduce-scatter on the data group, recorded in the order they ended.
  std::vector<CommTiming> c{{"all_gather", "data", 0, 1e6, "comm", 0, 0.00 * scale, 0.01 * scale, "ring", "simple"},
                            {"all_gather", "data", 1, 1e6, "comm", 0, 0.01 * scale, 0.02 * scale, "ring", "simple"},
                            {"reduce_scatter", "data", 0, 1e6, "comm", 0, 0.2 * scale, 0.25 * scale, "ring", "simple"}};
  if (reversed) std::reverse(c.begin(), c.end());
  r.comm = c;
  return r;
}
}  // namespace

TEST_CASE("collectives are matched by kind, group and index, not by position") {
  const Comparison c = compare(with_comms(1.0, false), with_comms(1.0, true), 0.10);
  CHECK(c.pass);
  CHECK(c.buckets.empty());
  REQUIRE(c.comms.size() == 6);
  CHECK(c.comms[0].name == "all-gather data 0 start");
  for (const CompareRow& r : c.comms) CHECK(r.judged_error == 0);
  CHECK_THAT(render_comparison(c), Catch::Contains("Collectives (matched by kind, group and index"));
}

TEST_CASE("a collective on one side only fails the comparison and is named") {
  StepResult m = with_comms(1.0, false);
  m.comm.pop_back();
  m.comm.push_back({"all_reduce", "data", 0, 1e6, "comm", 0, 0.2, 0.25, "ring", "simple"});
  const Comparison c = compare(with_comms(1.0, false), m, 0.10);
  CHECK_FALSE(c.pass);
  CHECK(c.comms.size() == 4);
  REQUIRE(c.notes.size() == 2);
  CHECK(c.notes[0] == "reduce-scatter data 0: predicted, not measured");
  CHECK(c.notes[1] == "all-reduce data 0: measured, not predicted");
}
