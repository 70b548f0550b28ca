// The fast fidelity's probe solver (sim/src/fluid.hpp): max-min fair sharing, flows ending one after another.
#include <catch2/catch.hpp>

#include "dpsim/error.hpp"
#include "fluid.hpp"

using namespace dpsim::sim;

TEST_CASE("fluid: a flow alone runs at its link's capacity; flows on one link share it equally", "[sim]") {
  CHECK(fluid_makespan_s({{8e9, {0}}}, {2e9}) == Approx(4.0));
  CHECK(fluid_makespan_s({{8e9, {0}}, {8e9, {0}}}, {2e9}) == Approx(8.0));
  // The route's slowest link bounds a flow.
  CHECK(fluid_makespan_s({{8e9, {0, 1}}}, {2e9, 1e9}) == Approx(8.0));
}

TEST_CASE("fluid: max-min fairness, and the bandwidth a finished flow frees goes to the others", "[sim]") {
  // Link 0 (10 B/s): flows a and b; link 1 (2 B/s): flows b and c. Link 1 is the bottleneck: b and c get 1 each,
  // a gets the 9 left on link 0. a (9 B) and b (1 B) end at t = 1; c (3 B) has 2 B left, alone on link 1 at 2 B/s.
  const std::vector<FluidFlow> flows{{9, {0}}, {1, {0, 1}}, {3, {1}}};
  CHECK(fluid_makespan_s(flows, {10, 2}) == Approx(2.0));
  // Without c, b takes all of link 1 (2 B/s) and a the 8 left: b ends at 0.5 s, then a has 5 B left at 10 B/s.
  CHECK(fluid_makespan_s({{9, {0}}, {1, {0, 1}}}, {10, 2}) == Approx(1.0));
}

TEST_CASE("fluid: no bytes or no link takes no time; a link outside the capacities is an error", "[sim]") {
  CHECK(fluid_makespan_s({}, {1}) == 0.0);
  CHECK(fluid_makespan_s({{0, {0}}, {5, {}}}, {1}) == 0.0);
  CHECK_THROWS_AS(fluid_makespan_s({{1, {3}}}, {1}), dpsim::RuntimeError);
  CHECK_THROWS_AS(fluid_makespan_s({{1, {0}}}, {0}), dpsim::RuntimeError);
}
