// One fabric summary for estimate, inspect topology and predict: an oversubscribed leaf uplink and the slowest
// NIC bound the closed form exactly where they bound the simulated ring.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "../source_dir.hpp"
#include "dpsim/cost.hpp"
#include "dpsim/load.hpp"
#include "dpsim/sim/simulate.hpp"
#include "sim_fixtures.hpp"

using namespace dpsim;
using namespace dpsim::test;

namespace {

constexpr long long kBytes = 1LL << 30;  // on the plateau: latency and pipeline fill are well under 1%
constexpr double kTolerance = 1e-3;      // estimate vs predict, relative; both run the same ring and links

std::string fixture(const std::string& name) {
  return std::string(DPSIM_SOURCE_DIR) + "/tests/data/oversubscription/" + name;
}

CollectiveCost estimated(const Scenario& s) {
  return allreduce_cost(static_cast<double>(kBytes), summarize_fabric(s.topology), s.nccl, s.collective);
}

// The all-reduce bus bandwidth estimate and inspect topology print: NCCL's model on the fabric summary.
double estimated_busbw(const Scenario& s) { return estimated(s).busbw_bytes_per_s; }

// Its bandwidth term alone (less NCCL's latency and the pipeline fill): the links' bottleneck x efficiency.
double estimated_link_busbw(const Scenario& s) {
  const CollectiveCost c = estimated(s);
  return ring_bytes_sent_per_gpu(static_cast<double>(kBytes), s.world_size()) / (c.time_s - c.latency_s - c.fill_s);
}

// The same all-reduce as predict simulates it: one bucket, no overlap, its duration.
double simulated_busbw(const Scenario& s) {
  SimOptions o;
  o.overlap = false;
  o.progress = false;
  const StepResult r = simulate(s, one_bucket_plan(s.world_size(), kBytes), o);
  REQUIRE(r.buckets.size() == 1);
  return ring_bytes_sent_per_gpu(static_cast<double>(kBytes), s.world_size()) /
         (r.buckets[0].end_s - r.buckets[0].start_s);
}

void check_agree(const Scenario& s, double expected_busbw) {
  const double est = estimated_busbw(s), sim = simulated_busbw(s);
  INFO(s.topology.name << ": estimate " << est / 1e9 << " GB/s, predict " << sim / 1e9 << " GB/s, expected about "
                       << expected_busbw / 1e9 << " GB/s");
  CHECK(std::abs(est - sim) / sim < kTolerance);
  CHECK(estimated_link_busbw(s) == Approx(expected_busbw).epsilon(1e-6));
}

}  // namespace

TEST_CASE("1:1, 2:1 and 8:1 leaf uplinks: estimate and predict agree, and differ from each other", "[sim]") {
  // One node per leaf: the ring between the 2 nodes climbs each leaf's uplink, 8 x 50 GB/s / oversubscription.
  double previous = 0;
  for (int over : {1, 2, 8}) {
    const Scenario s = scenario_on(load_topology(fixture("fat-tree-" + std::to_string(over) + "to1.yaml")));
    const double eff = s.nccl.ring_efficiency_for("net", s.topology.gpu.arch);
    const double nvswitch = 450e9 * s.nccl.ring_efficiency_for("nvswitch", s.topology.gpu.arch);
    const double bound = std::min(nvswitch, 400e9 / over * eff);
    CHECK(summarize_fabric(s.topology).inter_ring_bytes_per_s == Approx(400e9 / over));
    check_agree(s, bound);
    if (previous > 0) CHECK(estimated_busbw(s) < 0.9 * previous);
    previous = estimated_busbw(s);
  }
}

TEST_CASE("4 nodes per leaf: the ring crosses each leaf once, so only an uplink below one node's NICs binds it",
          "[sim]") {
  // 8 nodes, 2 leaves of 4 (h100-ib-cluster's leaf_radix). 2:1 leaves 4 x 400 / 2 = 800 GB/s per uplink for one
  // node's 400 GB/s of ring traffic: no change. 8:1 leaves 200 GB/s: half the NICs' rate.
  const Scenario full = scenario_on(ib_cluster(8, 8, 50, 4, 1.0));
  const Scenario half = scenario_on(ib_cluster(8, 8, 50, 4, 2.0));
  const Scenario eighth = scenario_on(ib_cluster(8, 8, 50, 4, 8.0));
  const double eff = full.nccl.ring_efficiency_for("net", full.topology.gpu.arch);
  check_agree(half, estimated_link_busbw(full));
  check_agree(eighth, 200e9 * eff);
  CHECK(summarize_fabric(eighth.topology).uplink_bound());
  CHECK(!summarize_fabric(half.topology).uplink_bound());
}

TEST_CASE("a partial last leaf bounds the ring: 5 nodes on leaves of 4 at 2:1", "[sim]") {
  // Leaf 1 holds one node: its uplink is 400 / 2 = 200 GB/s.
  const Scenario s = scenario_on(ib_cluster(5, 8, 50, 4, 2.0));
  check_agree(s, 200e9 * s.nccl.ring_efficiency_for("net", s.topology.gpu.arch));
}

TEST_CASE("rail-optimized groups: the rail uplinks bound the ring at 8:1", "[sim]") {
  const Scenario s = scenario_on(ib_cluster(8, 8, 50, 4, 8.0, NetworkKind::rail_optimized));
  check_agree(s, 200e9 * s.nccl.ring_efficiency_for("net", s.topology.gpu.arch));
}

TEST_CASE("the slowest NIC paces every channel of the ring between nodes", "[sim]") {
  // NCCL gives each NIC's channel an equal share: 8 NICs with one at 10 GB/s move 8 x 10, not the 360 average.
  Topology t = ib_cluster(2, 8, 50, 4, 1.0);
  t.nics[3].link.bandwidth_bytes_per_s = 10e9;
  const Scenario s = scenario_on(t);
  CHECK(summarize_fabric(t).nic_ring_bytes_per_s == Approx(80e9));
  check_agree(s, 80e9 * s.nccl.ring_efficiency_for("net", t.gpu.arch));
}
