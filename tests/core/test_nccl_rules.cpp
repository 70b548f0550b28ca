// NCCL's tuning rules, one test each, with the src/graph/tuning.cc line (NCCL 2.30.7, data/nccl.yaml) it follows.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "../source_dir.hpp"
#include "dpsim/collective_algorithm.hpp"
#include "dpsim/cost.hpp"
#include "dpsim/error.hpp"
#include "dpsim/load.hpp"
#include "dpsim/nccl_release.hpp"
#include "nccl_yaml_edit.hpp"

using namespace dpsim;

namespace {

std::string src(const std::string& rel) { return std::string(DPSIM_SOURCE_DIR) + "/" + rel; }

FabricSummary cluster(const char* topology, int nodes, int gpus_per_node = 0) {
  Topology t = load_topology(src(std::string("topologies/") + topology + ".yaml"));
  t.nodes = nodes;
  if (gpus_per_node > 0) t = keep_first_gpus(t, gpus_per_node);
  return summarize_fabric(t);
}

double busbw(double bytes, const FabricSummary& f, const NcclModel& nccl, Algorithm a, Protocol p) {
  return allreduce_cost(bytes, f, nccl, {a, p}).busbw_bytes_per_s;
}

double latency(const FabricSummary& f, const NcclModel& nccl, Algorithm a, Protocol p) {
  return allreduce_cost(8, f, nccl, {a, p}).latency_s;
}

const double kHuge = 64.0 * (1LL << 30);  // past the tree correction table and every fill: bandwidth only

}  // namespace

TEST_CASE("NCCL chooses the tree by its own factors: x0.92, LL x1/3.8, LL128 x120/128 (tuning.cc:331-335)") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  const FabricSummary f = cluster("h100-ib-cluster", 4);  // 4 nodes: no two-node relief
  const auto tuner = [&](Protocol p) {
    return algorithm_descriptor(Algorithm::tree).cost(CollectiveKind::all_reduce, kHuge, p, f, nccl).tuner_time_s;
  };
  const double ring = busbw(kHuge, f, nccl, Algorithm::ring, Protocol::simple);
  const double sent = ring_bytes_sent_per_gpu(kHuge, f.world);
  CHECK(sent / tuner(Protocol::simple) == Approx(0.92 * ring).epsilon(0.01));
  CHECK(sent / tuner(Protocol::ll128) == Approx(0.92 * 120 / 128 * ring).epsilon(0.01));
  CHECK(sent / tuner(Protocol::ll) == Approx(20.4e9).epsilon(0.01));  // 0.92/3.8 of it, capped by llMaxBw (3+ nodes)
  // the call itself runs at the ring's protocol shares: Simple as the ring, so NCCL's model runs the ring here
  CHECK(busbw(kHuge, f, nccl, Algorithm::tree, Protocol::simple) == Approx(ring).epsilon(0.01));
  CHECK(allreduce_cost(kHuge, f, nccl, {Algorithm::automatic, Protocol::simple}).algorithm != Algorithm::tree);
}

TEST_CASE("LL's cap across nodes is llMaxBws' row of the host CPU vendor, column of the node count (:267-272)") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  FabricSummary two = cluster("h100-ib-cluster", 2), four = cluster("h100-ib-cluster", 4);
  CHECK(busbw(kHuge, two, nccl, Algorithm::ring, Protocol::ll) == Approx(39.0e9).epsilon(0.01));
  CHECK(busbw(kHuge, four, nccl, Algorithm::ring, Protocol::ll) == Approx(20.4e9).epsilon(0.01));
  two.cpu_vendor = four.cpu_vendor = CpuVendor::amd;
  CHECK(busbw(kHuge, two, nccl, Algorithm::ring, Protocol::ll) == Approx(22.5e9).epsilon(0.01));
  CHECK(busbw(kHuge, four, nccl, Algorithm::ring, Protocol::ll) == Approx(19.0e9).epsilon(0.01));
  // one node: the architecture's row (Hopper 141 GB/s) whatever the CPU
  FabricSummary one = cluster("h100-8x-nvswitch", 1);
  one.cpu_vendor = CpuVendor::amd;
  CHECK(busbw(kHuge, one, nccl, Algorithm::ring, Protocol::ll) == Approx(141e9).epsilon(0.01));
}

TEST_CASE("a topology's cpu_vendor: amd hosts post network work slower (getNetOverhead 2 us, x3 Simple, :230)") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  FabricSummary intel = cluster("h100-ib-cluster", 2), amd = intel;
  amd.cpu_vendor = CpuVendor::amd;
  // each of the 2(n-1) - 2(nodes-1) intra-node steps costs max(hwLat NVLink Ring Simple 3.4 us, overhead x 3)
  const int intra_steps = 2 * (16 - 1) - 2 * (2 - 1);
  const double factor = nccl.ring_plateau_factor(Arch::hopper);
  CHECK(latency(amd, nccl, Algorithm::ring, Protocol::simple) -
            latency(intel, nccl, Algorithm::ring, Protocol::simple) ==
        Approx(intra_steps * (6.0e-6 - 3.4e-6) * factor));
}

TEST_CASE("tree latency: 2 ((ppn - 1) intraLat + log2i(nNodes) interLat), integer log2 (:416)") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  const double two = latency(cluster("h100-ib-cluster", 2), nccl, Algorithm::tree, Protocol::ll);
  const double three = latency(cluster("h100-ib-cluster", 3), nccl, Algorithm::tree, Protocol::ll);
  const double four = latency(cluster("h100-ib-cluster", 4), nccl, Algorithm::tree, Protocol::ll);
  CHECK(three == Approx(two));              // log2i(3) = 1
  CHECK(four - two == Approx(2 * 5.0e-6));  // one more level of hwLat NET Tree LL, both ways
  CHECK(two == Approx(6.8e-6 + 2 * (7 * 0.6e-6 + 1 * 5.0e-6)));
}

TEST_CASE("with one GPU per node the ring's network step is priced at the tree's NET row (:386-388)") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  const FabricSummary f = cluster("h100-ib-cluster", 2, 1);
  // baseLat Ring LL 6.6 us + 2(n-1) = 2 steps, both inter-node, at hwLat NET Tree LL 5.0 us (the ring's row is 2.7)
  CHECK(latency(f, nccl, Algorithm::ring, Protocol::ll) == Approx(6.6e-6 + 2 * 5.0e-6));
}

TEST_CASE("Simple pays the network plugin's latency twice per network step (the flush, :389-391)") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  const FabricSummary efa = cluster("aws-p5-efa", 4);
  FabricSummary ib = efa;
  ib.net_class = "net";
  const double plugin = nccl.net_plugin_latency("efa");
  REQUIRE(plugin > 0);
  // tree on 4 nodes: 2 levels, both ways
  CHECK(latency(efa, nccl, Algorithm::tree, Protocol::ll) - latency(ib, nccl, Algorithm::tree, Protocol::ll) ==
        Approx(2 * 2 * plugin));
  CHECK(latency(efa, nccl, Algorithm::tree, Protocol::simple) - latency(ib, nccl, Algorithm::tree, Protocol::simple) ==
        Approx(2 * 2 * 2 * plugin));
}

TEST_CASE("two-node tree: the wire carries half the ring's network traffic; NCCL chooses without that (:316)") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  const FabricSummary f = cluster("a100-hdr-rail", 2);  // DGX A100: 8x HDR, the network is the ring's bottleneck
  const double ring = busbw(kHuge, f, nccl, Algorithm::ring, Protocol::simple);
  const double tree = busbw(kHuge, f, nccl, Algorithm::tree, Protocol::simple);
  CHECK(ring == Approx(200e9 * nccl.ring_efficiency.at("net")).epsilon(0.01));
  CHECK(tree > 1.05 * ring);  // a forced tree beats the network's line rate: bounded by the node's NVSwitch ring
  CHECK(tree == Approx(300e9 * nccl.ring_efficiency_for("nvswitch", Arch::ampere)).epsilon(0.01));
  // NCCL's own model prices the tree at the ring's network bandwidth x 0.92, so it runs the ring at this size
  CHECK(allreduce_cost(kHuge, f, nccl, {}).algorithm == Algorithm::ring);
}

TEST_CASE("the tree's network load is its double binary tree's busiest node: S, 1.5 S on 3 nodes, 2 S (trees.cc)") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  // 4 GB200s per node, one 400G NIC each: the network bounds both the ring and the tree (NVLink 5 is far above)
  const auto ratio = [&](int nodes) {
    const FabricSummary f = cluster("gb200-nvl72", nodes, 4);
    return busbw(kHuge, f, nccl, Algorithm::tree, Protocol::simple) /
           busbw(kHuge, f, nccl, Algorithm::ring, Protocol::simple);
  };
  // the ring's node sends 2(n-1)/n S; NCCL's double tree on 3 nodes (trees.cc: 0 -> 2 -> 1, shifted 1 -> 0 -> 2):
  // nodes 0 and 2 are interior in one tree and leaf or root in the other, 1.5 S (nccl#1801 measures 1.19 and 1.23)
  CHECK(ratio(3) == Approx(2.0 * 11 / 12 / 1.5).epsilon(0.01));
  // from 4 nodes an interior node (parent and two children) is a leaf of the other tree: 2 S, a little below the ring
  CHECK(ratio(4) == Approx(2.0 * 15 / 16 / 2).epsilon(0.01));
  CHECK(ratio(33) == Approx(2.0 * 131 / 132 / 2).epsilon(0.01));
  // 2 nodes: S, the relief the two-node test below checks
  CHECK(ratio(2) == Approx(2.0 * 7 / 8).epsilon(0.01));
}

TEST_CASE(
    "NVLSTree: latency intraLat + 2 log2i(nNodes) interLat, the network doubled on two nodes, one node's NVLS "
    "bus bandwidth (:310-323, :376-379, :428)") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  const FabricSummary two = cluster("h100-ib-cluster", 2), eight = cluster("h100-ib-cluster", 8);
  CHECK(latency(two, nccl, Algorithm::nvlstree, Protocol::simple) == Approx(25e-6 + 2 * 1 * 20.9e-6));
  CHECK(latency(eight, nccl, Algorithm::nvlstree, Protocol::simple) == Approx(25e-6 + 2 * 3 * 20.9e-6));
  // two nodes: NVLS inside the node bounds it, above the network's 0.96 x 400 line rate. NCCL's intraBw is one node's
  // NVLS bus bandwidth whatever the node count (0.587 x 450 GB/s algbw on 8 GPUs, 2 x 7/8 of it), turned into
  // algorithm bandwidth over all 16 ranks: the same bus bandwidth as one node, not 2 x 15/16 of the algbw
  const double on_two = busbw(kHuge, two, nccl, Algorithm::nvlstree, Protocol::simple);
  CHECK(on_two == Approx(0.587 * 450e9 * 2 * 7 / 8).epsilon(0.01));
  CHECK(on_two > 400e9);
  // eight nodes: the network at the ring's efficiency, each node sending 2 S through its double tree against the
  // ring's 2(n-1)/n S (the ring itself is bounded lower, by the NVSwitch ring)
  CHECK(busbw(kHuge, eight, nccl, Algorithm::nvlstree, Protocol::simple) ==
        Approx(400e9 * nccl.ring_efficiency.at("net") * 63 / 64).epsilon(0.005));
  CHECK(busbw(kHuge, eight, nccl, Algorithm::ring, Protocol::simple) < 0.97 * 400e9 * nccl.ring_efficiency.at("net"));
  CHECK_THROWS_WITH(allreduce_cost(1e6, two, nccl, {Algorithm::nvlstree, Protocol::ll}),
                    Catch::Contains("not available"));
}

TEST_CASE("NVLS on Blackwell: the Hopper-measured fraction x NCCL's nvlsEfficiency ratio 0.74 / 0.85 (:139-144)") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  const FabricSummary b200 = cluster("dgx-b200", 1), h100 = cluster("h100-8x-nvswitch", 1);
  const auto per_link = [&](const FabricSummary& f) {
    return kHuge / allreduce_cost(kHuge, f, nccl, {Algorithm::nvls, Protocol::simple}).time_s /
           f.intra_ring_bytes_per_s;
  };
  CHECK(per_link(b200) / per_link(h100) == Approx(0.74 / 0.85).epsilon(0.01));
}

TEST_CASE("LL128 by default only over NVLink paths: typeIntra <= PATH_NVB (:531), never on a PCIe-only node") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  const FabricSummary pcie = cluster("a100-pcie-4x-2socket", 1), mesh = cluster("v100-8x-nvlink-mesh", 1);
  CHECK_FALSE(nccl_enables_by_default(Protocol::ll128, pcie, nccl));
  CHECK(nccl_enables_by_default(Protocol::ll, pcie, nccl));
  CHECK(nccl_enables_by_default(Protocol::simple, pcie, nccl));
  CHECK(nccl_enables_by_default(Protocol::ll128, mesh, nccl));
  for (double bytes = 1024; bytes <= kHuge; bytes *= 4)
    CHECK(allreduce_cost(bytes, pcie, nccl, {}).protocol != Protocol::ll128);
  // a user's NCCL_PROTO=LL128 still runs it
  CHECK(allreduce_cost(1 << 20, pcie, nccl, {Algorithm::ring, Protocol::ll128}).protocol == Protocol::ll128);
  // one GPU per node has no intra-node path (PATH_LOC, search.cc:1088)
  CHECK(nccl_enables_by_default(Protocol::ll128, cluster("pcie-ethernet-cluster", 2, 1), nccl));
}

TEST_CASE("LL128 by architecture: before 2.27.3 only sm70/80/90 (+100/120 from 2.25), v2.18.3 tuning.cc:288-293") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  const FabricSummary turing = cluster("rtx2080ti-nvlink-pair", 1), volta = cluster("v100-8x-nvlink-mesh", 1);
  const FabricSummary blackwell = cluster("dgx-b200", 1);
  CHECK(nccl_enables_by_default(Protocol::ll128, turing, nccl));  // 2.30.7: every cc >= 70 (:534)
  CHECK(nccl_enables_by_default(Protocol::ll128, turing, nccl_for_release(nccl, "2.27.3")));
  for (const char* r : {"2.18.5", "2.22.3", "2.26.6"}) {
    CHECK_FALSE(nccl_enables_by_default(Protocol::ll128, turing, nccl_for_release(nccl, r)));
    CHECK(nccl_enables_by_default(Protocol::ll128, volta, nccl_for_release(nccl, r)));
  }
  CHECK_FALSE(nccl_enables_by_default(Protocol::ll128, blackwell, nccl_for_release(nccl, "2.24.3")));
  CHECK(nccl_enables_by_default(Protocol::ll128, blackwell, nccl_for_release(nccl, "2.25.1")));
}

TEST_CASE(
    "a small ring/LL call runs on fewer channels and threads: bytes < nc x nt x 8 B x nRanks (enqueue.cc:2093-2106)") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  const FabricSummary f = cluster("h200-8x-nvswitch", 1);  // 8 ranks: 64 B per thread, 32 KiB per 512-thread channel
  const double per_channel = nccl.ll_call_channels.channel_busbw_bytes_per_s.at(Arch::hopper);
  // the call's bandwidth term: the bus bytes over the time beyond its latency (LL has no pipeline fill)
  const auto term = [&](double bytes, const NcclModel& m) {
    const CollectiveCost c = allreduce_cost(bytes, f, m, {Algorithm::ring, Protocol::ll});
    return ring_bytes_sent_per_gpu(bytes, f.world) / (c.time_s - c.latency_s);
  };
  const auto bw = [&](double bytes) { return term(bytes, nccl); };
  // 32 KiB: one channel of 512 threads; 64 KiB: two; 128 KiB: four (while under the ring's full LL bandwidth)
  CHECK(bw(32768) == Approx(per_channel).epsilon(0.01));
  CHECK(bw(65536) == Approx(2 * per_channel).epsilon(0.01));
  CHECK(bw(131072) == Approx(4 * per_channel).epsilon(0.01));
  // 16 KiB: one channel, threads halved to 256; 8 KiB: 128; 1 KiB: 64, NCCL's floor (nt % 128 == 0 stops there)
  CHECK(bw(16384) == Approx(per_channel / 2).epsilon(0.01));
  CHECK(bw(8192) == Approx(per_channel / 4).epsilon(0.01));
  CHECK(bw(1024) == Approx(per_channel / 8).epsilon(0.01));
  // so the time is flat from 4 KiB to 256 KiB (the measured plateau), and a large call keeps the ring's LL bandwidth
  const double t4k = allreduce_cost(4096, f, nccl, {Algorithm::ring, Protocol::ll}).time_s;
  CHECK(allreduce_cost(262144, f, nccl, {Algorithm::ring, Protocol::ll}).time_s == Approx(t4k).epsilon(1e-6));
  NcclModel full = nccl;
  full.ll_call_channels.channel_busbw_bytes_per_s.clear();
  CHECK(bw(kHuge) == Approx(term(kHuge, full)).epsilon(1e-9));
  CHECK(bw(32768) < term(32768, full) / 4);
}

TEST_CASE(
    "NVLS on one node: the fill grows with NCCL's loop, NVLS channels x heads (enqueue.cc:2333-2359, search.cc:1126)") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  const auto fill = [&](const FabricSummary& f) {
    return allreduce_cost(kHuge, f, nccl, {Algorithm::nvls, Protocol::simple}).fill_s;  // saturated: bytes / bandwidth
  };
  const double h200 = fill(cluster("h200-8x-nvswitch", 1));  // the fitted call: 16 channels x 8 heads
  CHECK(h200 == Approx(9.5 * (1 << 20) / 255e9).epsilon(1e-6));
  // 72 GB200s: 24 Blackwell NVLS channels x min(72, NCCL_MAX_NVLS_ARITY 32) heads = 6x the loop
  CHECK(fill(cluster("gb200-nvl72", 1)) == Approx(6 * h200).epsilon(1e-6));
  // 5 H100s: 16 x 5 heads
  CHECK(fill(cluster("h100-8x-nvswitch", 1, 5)) == Approx(5.0 / 8 * h200).epsilon(1e-6));
}

TEST_CASE("NVLSTree's chunk pipeline: NVLS and network hops of a chunk, channels x heads at once (enqueue.cc:2276)") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  // 8 H100s per node: NVLS at one node's bus bandwidth (0.587 x 450 GB/s algbw on g GPUs x 2(g-1)/g) over all the
  // ranks' 2(n-1)/n; the network's algbw is the 8 x 400G NICs at the ring's efficiency over the bytes a node sends
  // through the double tree (S on two nodes, 2 S from four)
  const auto nvls_at = [](double g, double n) { return 0.587 * 450e9 * (2 * (g - 1) / g) / (2 * (n - 1) / n); };
  const double net = 400e9 * nccl.ring_efficiency.at("net");
  // 16 Hopper NVLS channels x `heads` pipelines, each hop a chunk at its side's share; the first chunk takes every
  // hop (2 NVLS, 2 x levels network), each later one the slowest, which S / algbw holds
  const auto expected = [&](double chunk, double heads, int levels, double net_algbw, double nvls) {
    const double p = 16 * heads, nvls_hop = chunk * p / nvls, net_hop = chunk * p / net_algbw;
    return 2 * nvls_hop + 2 * levels * net_hop - std::max(nvls_hop, net_hop);
  };
  const auto fill = [&](const FabricSummary& f, double bytes) {
    return allreduce_cost(bytes, f, nccl, {Algorithm::nvlstree, Protocol::simple}).fill_s;
  };
  FabricSummary two = cluster("h100-ib-cluster", 2);
  // 256 MiB: 16 MiB per channel, not below 16 loops of 8 heads x 128 KiB: NCCL_NVLS_CHUNKSIZE's 128 KiB
  CHECK(fill(two, 256.0 * (1 << 20)) == Approx(expected(131072, 8, 1, net, nvls_at(8, 16))));
  // 8 MiB: 512 KiB per channel, below 4 loops of 8 x 128 KiB: 64 KiB, not below 1 loop of 8 x 64 KiB
  CHECK(fill(two, 8.0 * (1 << 20)) == Approx(expected(65536, 8, 1, net, nvls_at(8, 16))));
  // 4 MiB: 256 KiB per channel, below 1 loop of 8 x 64 KiB: 32 KiB, each pipeline's whole share
  CHECK(fill(two, 4.0 * (1 << 20)) == Approx(expected(32768, 8, 1, net, nvls_at(8, 16))));
  // 4 nodes: the tree's cap of 64 KiB (transport/nvls.cc:227-229), two levels; the network is the slowest side, a
  // node sending 2 S through the double tree
  CHECK(fill(cluster("h100-ib-cluster", 4), 256.0 * (1 << 20)) ==
        Approx(expected(65536, 8, 2, net / 2, nvls_at(8, 32))));
  // a head per NIC-attached GPU (search.cc:754-770): 4 NICs, 4 heads; at most NCCL_MAX_NVLS_ARITY 32 heads
  FabricSummary four_nics = two;
  four_nics.nics_per_node = 4;
  CHECK(fill(four_nics, 256.0 * (1 << 20)) == Approx(expected(131072, 4, 1, net, nvls_at(8, 16))));
  FabricSummary wide = two;
  wide.gpus_per_node = wide.nics_per_node = 64;
  wide.world = 128;
  CHECK(fill(wide, 256.0 * (1 << 20)) == Approx(expected(131072, 32, 1, net, nvls_at(64, 128))));
  // NCCL chooses by latency + S / bandwidth, without the fill (tuning.cc ncclTopoGetAlgoTime): on 4 nodes at 32 MiB
  // it takes NVLSTree although the tree with LL128 takes less time with the fills
  const FabricSummary four = cluster("h100-ib-cluster", 4);
  const CollectiveCost c = allreduce_cost(32.0 * (1 << 20), four, nccl, {Algorithm::automatic, Protocol::automatic});
  CHECK(c.algorithm == Algorithm::nvlstree);
  CHECK(allreduce_cost(32.0 * (1 << 20), four, nccl, {Algorithm::tree, Protocol::ll128}).time_s < c.time_s);
}

TEST_CASE("CollNetChain: latency 2 (ppn - 1) intraLat + interLat, Simple only, SHARP fabrics of 2+ nodes (:420-421)") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  const FabricSummary f = cluster("h100-ib-sharp", 8);
  // hwLat NVLINK CollNetChain 2.8 us per chain hop both ways, NET 30 us once, the plugin's latency twice (Simple)
  CHECK(latency(f, nccl, Algorithm::collnet_chain, Protocol::simple) ==
        Approx(2 * 7 * 2.8e-6 + 30e-6 + 2 * nccl.net_plugin_latency("net")));
  CHECK_THROWS_WITH(allreduce_cost(1e6, f, nccl, {Algorithm::collnet_chain, Protocol::ll}),
                    Catch::Contains("not available"));
  CHECK_THROWS_WITH(allreduce_cost(1e6, cluster("h100-ib-cluster", 8), nccl, {Algorithm::collnet_chain}),
                    Catch::Contains("does not reduce in its switches"));
  CHECK_THROWS_WITH(allreduce_cost(1e6, cluster("h100-ib-sharp", 1), nccl, {Algorithm::collnet_chain}),
                    Catch::Contains("on one node"));
}

TEST_CASE(
    "CollNetChain: the chain's 2 S per GPU and the network's S each way; NCCL weighs it only when enabled (:504)") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  FabricSummary f = cluster("a100-hdr-rail", 8);
  f.sharp = true;  // DGX A100 nodes on SHARP switches: the NVSwitch chain bounds it, above the ring's network rate
  const double nvswitch = 300e9 * nccl.ring_efficiency_for("nvswitch", Arch::ampere);
  CHECK(busbw(kHuge, f, nccl, Algorithm::collnet_chain, Protocol::simple) ==
        Approx(2.0 * 63 / 64 * nvswitch / 2).epsilon(0.01));
  CHECK(busbw(kHuge, f, nccl, Algorithm::collnet_chain, Protocol::simple) >
        1.1 * busbw(kHuge, f, nccl, Algorithm::ring, Protocol::simple));
  CHECK(allreduce_cost(kHuge, f, nccl, {}).algorithm != Algorithm::collnet_chain);  // NCCL_COLLNET_ENABLE unset
  Collective enabled;
  enabled.collnet = true;
  CHECK(allreduce_cost(kHuge, f, nccl, enabled).algorithm == Algorithm::collnet_chain);
}

TEST_CASE("the tree's chunk pipeline: (hops - 1) chunks of NCCL's LL128 size, one channel per NIC (enqueue.cc:2286)") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  const auto fill_in_chunks = [&](const FabricSummary& f, double bytes, Protocol p) {
    const CollectiveCost c = allreduce_cost(bytes, f, nccl, {Algorithm::tree, p});
    // the wire's bus bandwidth: the call's bytes over what is neither latency nor fill; a channel's algbw is its
    // half over the node's NICs
    const double wire = 2.0 * (f.world - 1) / f.world * bytes / (c.time_s - c.latency_s - c.fill_s);
    return c.fill_s * (wire / 2 / f.nics_per_node);  // the fill, in bytes a channel moves meanwhile
  };
  // 4 DGX A100 nodes, 8 MiB: 1 MiB per channel; LL128's 576,000 B chunk halves while 1 MiB / chunk < (1 + 2 + 0.8)
  // x 64 / 8 and chunk > 131,072 (to 72,000), and not below (1 MiB / 72,000 >= 3.8 x 16 / 8): 2 (7 + 2) = 18 hops.
  const FabricSummary dgx = cluster("a100-hdr-rail", 4);
  CHECK(fill_in_chunks(dgx, 8.0 * (1 << 20), Protocol::ll128) == Approx(17 * 72000.0));
  // 1 MiB: 128 KiB per channel; the first rule stops at 72,000, the second halves to 18,000 (128 KiB / 18,000 >= 7.6)
  CHECK(fill_in_chunks(dgx, 1.0 * (1 << 20), Protocol::ll128) == Approx(17 * 18000.0));
  // Simple: NCCL's 512 KiB tree chunk, no halving
  CHECK(fill_in_chunks(dgx, 256.0 * (1 << 20), Protocol::simple) == Approx(17 * 524288.0));
  // LL forwards its lines as their flags arrive: no fill
  CHECK(allreduce_cost(1 << 20, dgx, nccl, {Algorithm::tree, Protocol::ll}).fill_s == 0);
  // One GPU per node on 2 nodes (its one NIC): no chain, one level up and down, 2 hops; 2 MiB on one channel, the
  // chunk halved to 72,000 by the first rule ((1 + 1 + 0.1) x 64) and to 36,000 by the second (2 MiB / 72,000 < 33.6)
  const FabricSummary one = cluster("h100-ib-cluster", 2, 1);
  CHECK(fill_in_chunks(one, 2.0 * (1 << 20), Protocol::ll128) == Approx(1 * 36000.0));
}

TEST_CASE(
    "the ring's plateau factor: multi-node all-reduce with Simple only, 1.9 below sm80 and 1.4 from it (:647-650)") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  CHECK(nccl.ring_plateau_factor(Arch::volta) == 1.9);
  CHECK(nccl.ring_plateau_factor(Arch::turing) == 1.9);
  CHECK(nccl.ring_plateau_factor(Arch::ampere) == 1.4);
  CHECK(nccl.ring_plateau_factor(Arch::hopper) == 1.4);
  const FabricSummary two = cluster("h100-ib-cluster", 2);
  const Collective ring_simple{Algorithm::ring, Protocol::simple};
  // an all-reduce's 2(n-1) steps cost twice a reduce-scatter's n-1; the all-reduce alone pays the factor on all of it
  const double ar = collective_cost(CollectiveKind::all_reduce, 8, two, nccl, ring_simple).latency_s;
  const double rs = collective_cost(CollectiveKind::reduce_scatter, 8, two, nccl, ring_simple).latency_s;
  const double ag = collective_cost(CollectiveKind::all_gather, 8, two, nccl, ring_simple).latency_s;
  CHECK(rs == Approx(ag));
  const double base = nccl.base_latency_s.at(Algorithm::ring).get(Protocol::simple);
  CHECK(ar == Approx(1.4 * (base + 2 * (rs - base))));
  // one node: no factor
  const FabricSummary one = cluster("h100-8x-nvswitch", 1);
  const double one_ar = collective_cost(CollectiveKind::all_reduce, 8, one, nccl, ring_simple).latency_s;
  const double one_rs = collective_cost(CollectiveKind::reduce_scatter, 8, one, nccl, ring_simple).latency_s;
  CHECK(one_ar == Approx(base + 2 * (one_rs - base)));
  // a V100 cluster pays 1.9
  FabricSummary volta = two;
  volta.arch = Arch::volta;
  const double v_ar = collective_cost(CollectiveKind::all_reduce, 8, volta, nccl, ring_simple).latency_s;
  const double v_rs = collective_cost(CollectiveKind::reduce_scatter, 8, volta, nccl, ring_simple).latency_s;
  CHECK(v_ar == Approx(1.9 * (base + 2 * (v_rs - base))));
}

TEST_CASE("an ARM host (Grace) reads the Intel entries of NCCL's per-vendor tables (:230-232, :267-272)") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  FabricSummary intel = cluster("h100-ib-cluster", 4), arm = intel;
  arm.cpu_vendor = CpuVendor::arm;
  CHECK(busbw(kHuge, arm, nccl, Algorithm::ring, Protocol::ll) ==
        busbw(kHuge, intel, nccl, Algorithm::ring, Protocol::ll));
  CHECK(latency(arm, nccl, Algorithm::ring, Protocol::simple) ==
        latency(intel, nccl, Algorithm::ring, Protocol::simple));
  CHECK(nccl.net_overhead(CpuVendor::arm) == nccl.net_overhead(CpuVendor::intel));
  // the GB200 rack is an ARM host (topologies/gb200-nvl72.yaml)
  CHECK(cluster("gb200-nvl72", 2).cpu_vendor == CpuVendor::arm);
}

TEST_CASE("NVLSTree on Blackwell with an x86 host: treeCorrectionFactor up to 64 B x 2^23 (:643-645, from 2.29)") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  const FabricSummary b200 = cluster("dgx-b200", 2);  // Blackwell, Intel hosts
  const auto call = [&](const FabricSummary& f, const NcclModel& m, double bytes) {
    return algorithm_descriptor(Algorithm::nvlstree).cost(CollectiveKind::all_reduce, bytes, Protocol::simple, f, m);
  };
  // the bandwidth term (time less latency and fill) of 64 MiB: log2(64 MiB / 64 B) = 20, Simple's factor 0.8
  const auto bandwidth_s = [&](const FabricSummary& f, const NcclModel& m, double bytes) {
    const AlgorithmCost c = call(f, m, bytes);
    return c.time_s - c.latency_s - c.fill_s;
  };
  const double mib64 = 64.0 * (1 << 20);
  FabricSummary grace = b200;
  grace.cpu_vendor = CpuVendor::arm;  // GB200's Grace: not x86, no correction
  CHECK(bandwidth_s(b200, nccl, mib64) == Approx(bandwidth_s(grace, nccl, mib64) / 0.8));
  // NCCL's choice weighs it too
  const AlgorithmCost c = call(b200, nccl, mib64), g = call(grace, nccl, mib64);
  CHECK(c.tuner_time_s - c.latency_s == Approx((g.tuner_time_s - g.latency_s) / 0.8));
  // 512 MiB is the last corrected size (index 23, Simple 0.9); 1 GiB and above none
  CHECK(bandwidth_s(b200, nccl, 512.0 * (1 << 20)) == Approx(bandwidth_s(grace, nccl, 512.0 * (1 << 20)) / 0.9));
  CHECK(bandwidth_s(b200, nccl, 1024.0 * (1 << 20)) == Approx(bandwidth_s(grace, nccl, 1024.0 * (1 << 20))));
  // Hopper is not corrected, nor is NCCL 2.28's NVLSTree
  const FabricSummary h100 = cluster("h100-ib-cluster", 2);
  FabricSummary h100_arm = h100;
  h100_arm.cpu_vendor = CpuVendor::arm;
  CHECK(bandwidth_s(h100, nccl, mib64) == Approx(bandwidth_s(h100_arm, nccl, mib64)));
  CHECK(bandwidth_s(b200, nccl_for_release(nccl, "2.28.9"), mib64) == Approx(bandwidth_s(grace, nccl, mib64)));
  // the tree keeps its 23 sizes: 512 MiB uncorrected for it (:639 "logSize < 23")
  const FabricSummary four = cluster("h100-ib-cluster", 4);
  const auto tree_bw = [&](double bytes) {
    const AlgorithmCost t =
        algorithm_descriptor(Algorithm::tree).cost(CollectiveKind::all_reduce, bytes, Protocol::simple, four, nccl);
    return bytes / (t.time_s - t.latency_s - t.fill_s);
  };
  CHECK(tree_bw(512.0 * (1 << 20)) == Approx(tree_bw(kHuge)).epsilon(0.001));
}

TEST_CASE("data/nccl.yaml: the correction table needs each algorithm's entries, at most the table's length") {
  const std::string line = "tree_correction_entries: {tree: 23, nvlstree: 24}";
  const auto load_with = [&](const std::string& replacement) {
    std::string error;
    try {
      test::load_nccl_with(line, replacement);
    } catch (const InputError& e) {
      error = e.what();
    }
    return error;
  };
  CHECK_THAT(load_with(""), Catch::Contains("tree_correction_entries"));
  CHECK_THAT(load_with("tree_correction_entries: {tree: 23, nvlstree: 25}"), Catch::Contains("nvlstree"));
  CHECK(load_with(line).empty());
}
