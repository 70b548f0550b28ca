#include <catch2/catch.hpp>

#include <string>

#include "dpsim/cost.hpp"
#include "dpsim/load.hpp"

using namespace dpsim;

namespace {
std::string src(const std::string& rel) { return std::string(DPSIM_SOURCE_DIR) + "/" + rel; }
}  // namespace

TEST_CASE("ring traffic is 2(n-1)/n of the message") {
  CHECK(ring_bytes_sent_per_gpu(16.06e9, 8) == Approx(28.105e9));
  CHECK(ring_bytes_sent_per_gpu(1e9, 1) == 0);
  CHECK(ideal_ring_allreduce_seconds(16.06e9, 8, 450e9) == Approx(0.062456).epsilon(1e-4));
}

TEST_CASE("PCIe ring: GPUs behind two switches share each uplink once per direction") {
  const Topology t = load_topology(src("topologies/pcie4-8x.yaml"));
  const FabricSummary f = summarize_fabric(t);
  CHECK(f.intra_ring_bytes_per_s == Approx(32e9));
  Topology narrow = t;
  for (auto& sw : narrow.intra.switches) sw.uplink.bandwidth_bytes_per_s = 16e9;
  CHECK(summarize_fabric(narrow).intra_ring_bytes_per_s == Approx(16e9));
}

TEST_CASE("multi-node ring is limited by the node's NICs when they are slower than NVSwitch") {
  Topology t = load_topology(src("topologies/h100-ib-cluster.yaml"));
  const FabricSummary f = summarize_fabric(t);
  CHECK(f.inter_ring_bytes_per_s == Approx(400e9));  // 8 x 400 Gb/s
  CHECK(f.ring_bytes_per_s() == Approx(400e9));
}

TEST_CASE("NCCL's choice: LL for small messages, bandwidth protocols for large ones") {
  const Scenario s = load_scenario(src("scenarios/llama3.1-8b-8xh100.yaml"));
  const FabricSummary f = summarize_fabric(s.topology);
  const auto small = allreduce_cost(8 * 1024, f, s.nccl, {});
  CHECK(small.algorithm == Algorithm::ring);
  CHECK(small.protocol == Protocol::ll);
  const auto large = allreduce_cost(1e9, f, s.nccl, {});
  CHECK(large.algorithm == Algorithm::nvls);
  const auto pinned = allreduce_cost(16e9, f, s.nccl, {Algorithm::ring, Protocol::simple});
  CHECK(pinned.algorithm == Algorithm::ring);
  CHECK(pinned.busbw_bytes_per_s == Approx(450e9 * 0.82).epsilon(0.01));
}
