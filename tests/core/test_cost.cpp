#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "../source_dir.hpp"
#include "dpsim/cost.hpp"
#include "dpsim/load.hpp"
#include "nccl_yaml_edit.hpp"

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
  Topology t = load_topology(src("topologies/pcie4-8x.yaml"));
  t.intra.p2p = PcieP2p::all_paths;  // P2P between the switches too (NCCL's default stages it through host memory)
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

TEST_CASE("the pipeline fill grows like S / bandwidth and saturates at bytes / bandwidth") {
  const PipelineFill fill{32.0 * (1 << 20), 100e9};
  CHECK(fill.seconds(0) == 0);
  CHECK(fill.seconds(1024) == Approx(1024 / 100e9).epsilon(1e-4));
  CHECK(fill.seconds(1e12) == Approx(32.0 * (1 << 20) / 100e9));
  CHECK(fill.seconds(16e6) < fill.seconds(32e6));
}

TEST_CASE("Ampere's NVSwitch ring reaches less of the link than Hopper's (data/nccl.yaml by_arch)") {
  const Topology a100 = load_topology(src("topologies/a100-8x-nvswitch.yaml"));
  const Topology h100 = load_topology(src("topologies/h100-8x-nvswitch.yaml"));
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  CHECK(nccl.ring_efficiency_for("nvswitch", a100.gpu.arch) < nccl.ring_efficiency_for("nvswitch", h100.gpu.arch));
  // 8 GiB ring on 8x A100: busbw within 1% of the measured 232.54 GB/s (nccl-tests#175)
  const auto c = allreduce_cost(8.0 * (1LL << 30), summarize_fabric(a100), nccl, {Algorithm::ring, Protocol::simple});
  CHECK(c.busbw_bytes_per_s == Approx(232.54e9).epsilon(0.01));
  // a calibrated efficiency replaces the per-architecture one
  NcclModel calibrated = nccl;
  calibrated.set_ring_efficiency("nvswitch", 0.7);
  CHECK(calibrated.ring_efficiency_for("nvswitch", a100.gpu.arch) == 0.7);
}

TEST_CASE("the ring's pipeline fill is paid on one node and hidden behind a slower network") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  const Collective ring{Algorithm::ring, Protocol::simple};
  const auto one =
      allreduce_cost(128e6, summarize_fabric(load_topology(src("topologies/a100-8x-nvswitch.yaml"))), nccl, ring);
  CHECK(one.fill_s == Approx(nccl.ring_fill.seconds(128e6)));
  // 3 nodes x 4 HDR: 96 GB/s per node, far below NVLink; the GPU-side fill overlaps the NIC transfer
  Topology t = load_topology(src("topologies/a100-4xhdr-cluster.yaml"));
  const auto three = allreduce_cost(128e6, summarize_fabric(t), nccl, ring);
  CHECK(three.fill_s == 0);
  CHECK(three.busbw_bytes_per_s > 0.85 * 96e9);  // measured 95.7-96.4 GB/s (nccl-tests#119)
}

TEST_CASE("a scenario may use the first GPUs of a PCIe, mesh or NIC topology") {
  Topology mesh = keep_first_gpus(load_topology(src("topologies/v100-8x-nvlink-mesh.yaml")), 2);
  CHECK(mesh.gpus_per_node == 2);
  REQUIRE(!mesh.intra.mesh.empty());
  for (const auto& l : mesh.intra.mesh) CHECK((l.gpu_a < 2 && l.gpu_b < 2));
  CHECK(keep_first_gpus(mesh, 1).intra.mesh.empty());
  const Topology pcie = keep_first_gpus(load_topology(src("topologies/pcie4-8x.yaml")), 3);
  int served = 0;
  for (const auto& sw : pcie.intra.switches) served += static_cast<int>(sw.gpus.size());
  CHECK(served == 3);
  const Topology ib = keep_first_gpus(load_topology(src("topologies/h100-ib-cluster.yaml")), 4);
  CHECK(ib.nics.size() == 4);
  CHECK(summarize_fabric(ib).inter_ring_bytes_per_s == Approx(200e9));
}

TEST_CASE("training.tf32 runs fp32 matmuls at the GPU's TF32 tensor-core rate") {
  Scenario s = load_scenario(src("scenarios/bert-large-8xa100.yaml"));
  s.training.param_dtype = Dtype::fp32;
  CHECK(compute_model(s).peak_flops_per_s == Approx(19.5e12));  // CUDA-core FP32
  s.training.tf32 = true;
  CHECK(compute_model(s).peak_flops_per_s == Approx(156e12));  // A100 datasheet: TF32 156 TFLOPS dense
}

TEST_CASE("AWS EFA: its own ring efficiency and the plugin's per-hop latency (network.transport: efa)") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  const Topology efa = load_topology(src("topologies/aws-p5-efa.yaml"));
  Topology ib = load_topology(src("topologies/h100-ib-cluster.yaml"));
  ib.nodes = efa.nodes;
  const FabricSummary fe = summarize_fabric(efa), fi = summarize_fabric(ib);
  CHECK(fe.net_class == "efa");
  CHECK(fi.net_class == "net");
  CHECK(fe.inter_ring_bytes_per_s == fi.inter_ring_bytes_per_s);  // the same 3.2 Tb/s per node
  const Collective ring{Algorithm::ring, Protocol::simple};
  const double big = 64.0 * (1LL << 30);  // on the plateau: latency and fill are < 1%
  CHECK(allreduce_cost(big, fe, nccl, ring).busbw_bytes_per_s ==
        Approx(400e9 * nccl.ring_efficiency.at("efa")).epsilon(0.01));
  // on IB the NICs reach 0.96 x 400 GB/s, more than the NVSwitch ring's 0.82 x 450: the node bounds it
  CHECK(allreduce_cost(big, fi, nccl, ring).busbw_bytes_per_s ==
        Approx(std::min(400e9 * nccl.ring_efficiency.at("net"), 450e9 * 0.82)).epsilon(0.01));
  // Small messages pay the plugin's latency on every inter-node step (2 tree levels on 4 nodes, both ways)
  const Collective tree_ll{Algorithm::tree, Protocol::ll};
  const double extra = allreduce_cost(8, fe, nccl, tree_ll).latency_s - allreduce_cost(8, fi, nccl, tree_ll).latency_s;
  CHECK(extra == Approx(2 * 2 * nccl.net_plugin_latency("efa")));
  CHECK(nccl.net_plugin_latency("net") == 0);
  // A NCCL model without an EFA efficiency cannot price an EFA fabric: a clear error, not a crash
  NcclModel no_efa = nccl;
  no_efa.ring_efficiency.erase("efa");
  CHECK_THROWS_WITH(allreduce_cost(big, fe, no_efa, ring), Catch::Contains("ring_efficiency.efa: missing"));
}

TEST_CASE("a per-architecture hop latency replaces NCCL's for that GPU only; a calibration replaces both") {
  NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  const Topology a100 = load_topology(src("topologies/a100-8x-nvswitch.yaml"));
  const Topology h100 = load_topology(src("topologies/h100-8x-nvswitch.yaml"));
  const Collective ring_ll{Algorithm::ring, Protocol::ll};
  // 8 GPUs: LL base 6.6 us + 14 hops of NCCL's 0.6 us on both
  CHECK(allreduce_cost(8, summarize_fabric(a100), nccl, ring_ll).latency_s == Approx(6.6e-6 + 14 * 0.6e-6));
  // hw_latency.by_arch: {ampere: {nvlink: {ring: {ll: 2.6us}}}} (the Azure A100 VM's floor), read from YAML
  nccl = test::load_nccl_with("\nhw_latency:\n", "\nhw_latency:\n  by_arch: {ampere: {nvlink: {ring: {ll: 2.6us}}}}\n");
  CHECK(allreduce_cost(8, summarize_fabric(h100), nccl, ring_ll).latency_s == Approx(6.6e-6 + 14 * 0.6e-6));
  CHECK(allreduce_cost(8, summarize_fabric(a100), nccl, ring_ll).latency_s == Approx(6.6e-6 + 14 * 2.6e-6));
  // then NCCL's LL128 (40.6 us) is the A100's small-message floor
  const auto a = allreduce_cost(1024, summarize_fabric(a100), nccl, {});
  CHECK(a.protocol == Protocol::ll128);
  CHECK(a.time_s == Approx(40.6e-6).epsilon(0.01));
  // a calibrated hop replaces the shipped value for every architecture, and only that protocol's
  NcclModel calibrated = nccl;
  calibrated.set_hw_latency(Fabric::nvlink, Algorithm::ring, Protocol::ll, 1e-6);
  CHECK(calibrated.hw_latency(Fabric::nvlink, Algorithm::ring, Arch::ampere)->ll == 1e-6);
  CHECK(calibrated.hw_latency(Fabric::nvlink, Algorithm::ring, Arch::ampere)->ll128 ==
        nccl.hw_latency(Fabric::nvlink, Algorithm::ring, Arch::ampere)->ll128);
}
