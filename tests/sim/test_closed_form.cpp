// With overlap off and one bucket, the simulated ring equals the closed form
// latency + pipeline fill(S) + 2(n-1)/n * S / (bottleneck link x ring efficiency x protocol efficiency);
// a reduce-scatter or an all-gather of S moves (n-1)/n * S per rank instead.
#include <catch2/catch.hpp>
#include <cmath>

#include "dpsim/cost.hpp"
#include "dpsim/estimate.hpp"
#include "dpsim/program.hpp"
#include "dpsim/sim/simulate.hpp"
#include "sim_fixtures.hpp"

using namespace dpsim;
using namespace dpsim::test;

namespace {

double simulated_allreduce_s(const Scenario& s, long long bytes) {
  SimOptions o;
  o.overlap = false;
  o.progress = false;
  const StepResult r = simulate(s, one_bucket_plan(s.world_size(), bytes), o);
  REQUIRE(r.buckets.size() == 1);
  return r.buckets[0].end_s - r.buckets[0].start_s;
}

void check_ring(const Scenario& s, double bottleneck_bytes_per_s, const std::string& cls, long long bytes) {
  const int n = s.world_size();
  const FabricSummary f = summarize_fabric(s.topology);
  const CollectiveCost c = allreduce_cost(static_cast<double>(bytes), f, s.nccl, s.collective);
  const double busbw = bottleneck_bytes_per_s * s.nccl.ring_efficiency_for(cls, s.topology.gpu.arch) *
                       s.nccl.protocol_efficiency.get(Protocol::simple);
  const double closed = c.latency_s + s.nccl.ring_fill.seconds(static_cast<double>(bytes)) +
                        2.0 * (n - 1) / n * static_cast<double>(bytes) / busbw;
  const double sim = simulated_allreduce_s(s, bytes);
  INFO(s.topology.name << " n=" << n << " simulated " << sim << " s, closed form " << closed << " s, NCCL model "
                       << c.time_s);
  CHECK(std::abs(sim - closed) / closed < 1e-6);
  CHECK(std::abs(sim - c.time_s) / c.time_s < 1e-6);  // estimate and predict agree without contention
}

// One call of `kind` over the whole world: the one-bucket DDP program with its call's kind replaced.
double simulated_call_s(const Scenario& s, CollectiveKind kind, long long bytes) {
  const StepPlan plan = one_bucket_plan(s.world_size(), bytes);
  StepProgram program = make_step_program(plan, {});
  program.classes.front().comms.front().kind = kind;
  SimOptions o;
  o.overlap = false;
  o.progress = false;
  o.program = &program;
  const StepResult r = simulate(s, plan, o);
  REQUIRE(r.comm.size() == 1);
  CHECK(r.comm[0].kind == to_string(kind));
  return r.comm[0].end_s - r.comm[0].start_s;
}

// Reduce-scatter and all-gather on the ring (the only algorithm NCCL's model runs them on here).
void check_half_ring(const Scenario& s, double bottleneck_bytes_per_s, const std::string& cls, long long bytes) {
  const int n = s.world_size();
  const FabricSummary f = summarize_fabric(s.topology);
  const double busbw = bottleneck_bytes_per_s * s.nccl.ring_efficiency_for(cls, s.topology.gpu.arch) *
                       s.nccl.protocol_efficiency.get(Protocol::simple);
  for (CollectiveKind kind : {CollectiveKind::reduce_scatter, CollectiveKind::all_gather}) {
    const CollectiveCost c = collective_cost(kind, static_cast<double>(bytes), f, s.nccl, s.collective);
    const double closed = c.latency_s + c.fill_s + (n - 1.0) / n * static_cast<double>(bytes) / busbw;
    const double sim = simulated_call_s(s, kind, bytes);
    INFO(to_string(kind) << " on " << s.topology.name << " n=" << n << " simulated " << sim << " s, closed form "
                         << closed << " s, NCCL model " << c.time_s);
    CHECK(c.algorithm == Algorithm::ring);
    CHECK(std::abs(sim - closed) / closed < 1e-6);
    CHECK(std::abs(sim - c.time_s) / c.time_s < 1e-6);
  }
}

}  // namespace

TEST_CASE("reduce-scatter and all-gather on NVSwitch, PCIe and across nodes equal the closed form", "[sim]") {
  for (int n : {2, 3, 4, 8, 16, 64, 256, 1024, 4096}) {
    check_half_ring(scenario_on(nvswitch_node(n)), 450e9, "nvswitch", 1LL << 30);
    check_half_ring(scenario_on(pcie_node(n, 4, 32, 32, n > 4, 40)), 32e9, "pcie", 1LL << 28);
  }
  for (int nodes : {2, 3, 8, 32, 128, 512}) {
    const Scenario s = scenario_on(ib_cluster(nodes));
    const bool net_bound = 400e9 * s.nccl.ring_efficiency.at("net") < 450e9 * s.nccl.ring_efficiency.at("nvswitch");
    check_half_ring(s, net_bound ? 400e9 : 450e9, net_bound ? "net" : "nvswitch", 1LL << 30);
  }
}

TEST_CASE("ring on NVSwitch equals the closed form, n = 2..4096", "[sim]") {
  for (int n : {2, 3, 4, 8, 16, 64, 256, 1024, 4096})
    check_ring(scenario_on(nvswitch_node(n)), 450e9, "nvswitch", 1LL << 30);
}

TEST_CASE("ring on a PCIe tree equals the closed form, n = 2..4096", "[sim]") {
  // 4 GPUs per switch, two sockets: the ring crosses every uplink and the inter-socket link once per direction.
  for (int n : {2, 3, 4, 8, 16, 64, 256, 1024, 4096}) {
    const bool sockets = n > 4;
    check_ring(scenario_on(pcie_node(n, 4, 32, 32, sockets, 40)), 32e9, "pcie", 1LL << 28);
  }
}

TEST_CASE("ring across nodes equals the closed form, n = 16..4096", "[sim]") {
  // 8 NICs x 50 GB/s = 400 GB/s per node, below NVLink's 450 x efficiency: the network is the bottleneck.
  for (int nodes : {2, 3, 8, 32, 128, 512}) {
    const Scenario s = scenario_on(ib_cluster(nodes));
    const double nvlink = 450e9 * s.nccl.ring_efficiency.at("nvswitch");
    const double net = 400e9 * s.nccl.ring_efficiency.at("net");
    if (net < nvlink)
      check_ring(s, 400e9, "net", 1LL << 30);
    else
      check_ring(s, 450e9, "nvswitch", 1LL << 30);
  }
}
