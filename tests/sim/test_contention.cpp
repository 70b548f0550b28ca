// Contention is simulated, not assumed away: when ring flows share a narrow link, the all-reduce's
// bus bandwidth drops to exactly what that link allows.
#include <catch2/catch.hpp>
#include <cmath>
#include <iostream>

#include "dpsim/cost.hpp"
#include "dpsim/sim/simulate.hpp"
#include "sim_fixtures.hpp"

using namespace dpsim;
using namespace dpsim::test;

namespace {

constexpr long long kBytes = 1LL << 30;

// Bus bandwidth of the bandwidth term: 2(n-1)/n * S / (duration - NCCL latency - pipeline fill).
double simulated_busbw(const Scenario& s) {
  SimOptions o;
  o.overlap = false;
  o.progress = false;
  const StepResult r = simulate(s, one_bucket_plan(s.world_size(), kBytes), o);
  const CollectiveCost c =
      allreduce_cost(static_cast<double>(kBytes), summarize_fabric(s.topology), s.nccl, s.collective);
  const int n = s.world_size();
  return 2.0 * (n - 1) / n * static_cast<double>(kBytes) /
         (r.buckets[0].end_s - r.buckets[0].start_s - c.latency_s - c.fill_s);
}

void check(const char* what, double simulated, double expected) {
  std::cout << what << ": simulated busbw " << simulated / 1e9 << " GB/s, shared link allows " << expected / 1e9
            << " GB/s\n";
  INFO(what);
  CHECK(std::abs(simulated - expected) / expected < 1e-6);
}

}  // namespace

TEST_CASE("GPUs behind one PCIe uplink share it", "[sim]") {
  // GPUs 0,2,4,6 behind sw0 and 1,3,5,7 behind sw1: every ring edge crosses, so 4 flows share each
  // uplink direction: 32 GB/s / 4 per flow.
  Topology t = pcie_node(8, 4, 32, 32);
  t.intra.switches[0].gpus = {0, 2, 4, 6};
  t.intra.switches[1].gpus = {1, 3, 5, 7};
  const Scenario s = scenario_on(t);
  const double eff = s.nccl.ring_efficiency.at("pcie");
  const Scenario plain = scenario_on(pcie_node(8, 4, 32, 32));
  const double before = simulated_busbw(plain);
  check("PCIe, ring in switch order", before, 32e9 * eff);
  check("PCIe, interleaved GPUs: 4 flows per uplink", simulated_busbw(s), 32e9 / 4 * eff);
}

TEST_CASE("a narrow inter-socket link bounds the ring", "[sim]") {
  const Scenario s = scenario_on(pcie_node(8, 4, 32, 32, true, 10));
  check("PCIe across sockets at 10 GB/s", simulated_busbw(s), 10e9 * s.nccl.ring_efficiency.at("pcie"));
}

TEST_CASE("an oversubscribed fat-tree leaf uplink bounds the ring", "[sim]") {
  // 2 nodes per leaf x 400 GB/s of NICs / oversubscription 4 = 200 GB/s leaf uplink, crossed by one
  // node's ring traffic per direction.
  const Scenario full = scenario_on(ib_cluster(8, 8, 50, 2, 1.0));
  const Scenario over = scenario_on(ib_cluster(8, 8, 50, 2, 4.0));
  const double net = full.nccl.ring_efficiency.at("net");
  const double nvl = 450e9 * full.nccl.ring_efficiency.at("nvswitch");
  check("fat tree, full bisection", simulated_busbw(full), std::min(400e9 * net, nvl));
  check("fat tree, oversubscribed 4:1", simulated_busbw(over), 200e9 * net);
}

TEST_CASE("two GPUs sharing one NIC halve the inter-node bandwidth", "[sim]") {
  const Scenario eight = scenario_on(ib_cluster(4, 8, 25));
  const Scenario four = scenario_on(ib_cluster(4, 4, 25));
  const double net = eight.nccl.ring_efficiency.at("net");
  check("8 NICs per node", simulated_busbw(eight), 8 * 25e9 * net);
  check("4 NICs per node, 2 GPUs each", simulated_busbw(four), 4 * 25e9 * net);
}

TEST_CASE("rail-optimized fabric: a ring stays on its rails", "[sim]") {
  const Scenario s = scenario_on(ib_cluster(64, 8, 50, 32, 1.0, NetworkKind::rail_optimized));
  const double net = s.nccl.ring_efficiency.at("net");
  check("rail-optimized, 2 scalable units", simulated_busbw(s),
        std::min(400e9 * net, 450e9 * s.nccl.ring_efficiency.at("nvswitch")));
}
