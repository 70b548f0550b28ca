#include <catch2/catch.hpp>

#include "dpsim/backend/measure.hpp"
#include "dpsim/error.hpp"

using namespace dpsim;
using namespace dpsim::backend;

TEST_CASE("percentiles interpolate between closest ranks (numpy's default)") {
  const std::vector<double> v = {10, 1, 9, 2, 8, 3, 7, 4, 6, 5};
  CHECK(percentile(v, 0.5) == Approx(5.5));
  CHECK(percentile(v, 0.1) == Approx(1.9));
  CHECK(percentile(v, 0.9) == Approx(9.1));
  CHECK(percentile(v, 0.0) == 1);
  CHECK(percentile(v, 1.0) == 10);
  CHECK(percentile({4.0}, 0.9) == 4);
  const Spread s = spread_of(v);
  CHECK(s.median == Approx(5.5));
  CHECK(s.p10 == Approx(1.9));
  CHECK(s.p90 == Approx(9.1));
  CHECK_THROWS(percentile({}, 0.5));
}

TEST_CASE("iteration loop: warm-up untimed (iteration 0 always among them), then timed") {
  std::vector<std::pair<int, bool>> calls;
  run_iterations(3, 10, [&](int i, bool timed) { calls.emplace_back(i, timed); });
  REQUIRE(calls.size() == 13);
  CHECK(calls[0] == std::make_pair(0, false));
  CHECK(calls[2] == std::make_pair(2, false));
  CHECK(calls[3] == std::make_pair(3, true));
  CHECK(calls[12] == std::make_pair(12, true));
  CHECK_THROWS_AS(run_iterations(0, 10, [](int, bool) {}), InputError);
  CHECK_THROWS_AS(run_iterations(3, 0, [](int, bool) {}), InputError);
}
