// NCCL's transport between two GPUs of a PCIe node (core/cost nccl_uses_p2p): peer-to-peer, or through host memory
// (its SHM transport), and the rate a ring of SHM hops runs at. One test per rule, with the source line it follows.
#include <catch2/catch.hpp>

#include <string>

#include "../source_dir.hpp"
#include "dpsim/cost.hpp"
#include "dpsim/load.hpp"

using namespace dpsim;

namespace {

std::string src(const std::string& rel) { return std::string(DPSIM_SOURCE_DIR) + "/" + rel; }

Link link(double gbps) { return Link{gbps * 1e9, 1e-6}; }

// `gpus` GPUs on PCIe Gen4, split evenly over `switches` switches under one CPU.
Topology pcie_box(int gpus, int switches, bool gpu_allows_p2p, CpuVendor cpu) {
  Topology t;
  t.name = "box";
  t.gpus_per_node = gpus;
  t.cpu_vendor = cpu;
  t.gpu.pcie_p2p = gpu_allows_p2p;
  t.intra.kind = IntraKind::pcie;
  t.intra.gpu_link = link(32);
  for (int s = 0; s < switches; ++s) {
    PcieSwitch sw{"sw" + std::to_string(s), "cpu0", {}, link(32)};
    for (int g = s * gpus / switches; g < (s + 1) * gpus / switches; ++g) sw.gpus.push_back(g);
    t.intra.switches.push_back(sw);
  }
  return t;
}

CollectiveCost one_gib(const Topology& t, const NcclModel& nccl) {
  return allreduce_cost(1 << 30, summarize_fabric(t), nccl, {Algorithm::ring, Protocol::simple});
}

}  // namespace

TEST_CASE("NCCL runs P2P within a PCIe switch and SHM through a CPU (paths.cc:356-368, p2pLevel PATH_PXB)") {
  const Topology intel = pcie_box(4, 2, true, CpuVendor::intel);
  CHECK(nccl_uses_p2p(intel, true));
  CHECK_FALSE(nccl_uses_p2p(intel, false));
  const FabricSummary f = summarize_fabric(intel);
  CHECK(f.intra_ring_edges == 4);
  CHECK(f.intra_shm_edges == 2);  // sw0 -> sw1 and back
}

TEST_CASE("on AMD x86 NCCL runs P2P on every path between 2 GPUs only (paths.cc:362 GPU.count <= 2)") {
  CHECK(nccl_uses_p2p(pcie_box(2, 2, true, CpuVendor::amd), false));
  CHECK_FALSE(nccl_uses_p2p(pcie_box(4, 2, true, CpuVendor::amd), false));
  CHECK_FALSE(nccl_uses_p2p(pcie_box(2, 2, true, CpuVendor::intel), false));
}

TEST_CASE("a GPU whose driver allows no PCIe P2P (GeForce) runs SHM even within a switch (checkNvml)") {
  const Topology geforce = pcie_box(2, 1, false, CpuVendor::amd);
  CHECK_FALSE(nccl_uses_p2p(geforce, true));
  CHECK(summarize_fabric(geforce).intra_shm_edges == 2);
  CHECK_FALSE(load_gpu("RTX-4090").pcie_p2p);
  CHECK_FALSE(load_gpu("RTX-5090").pcie_p2p);
  CHECK_FALSE(load_gpu("RTX-2080-Ti").pcie_p2p);
  CHECK(load_gpu("RTX-PRO-6000").pcie_p2p);
  CHECK(load_gpu("L40S").pcie_p2p);
}

TEST_CASE("NCCL_P2P_LEVEL=SYS and NCCL_P2P_DISABLE=1 override the rule (intra_node.p2p)") {
  Topology t = pcie_box(4, 2, false, CpuVendor::intel);
  t.intra.p2p = PcieP2p::all_paths;  // a P2P-enabled driver, NCCL_P2P_LEVEL=SYS
  CHECK(nccl_uses_p2p(t, false));
  CHECK(summarize_fabric(t).intra_shm_edges == 0);
  t = pcie_box(4, 1, true, CpuVendor::intel);
  t.intra.p2p = PcieP2p::disabled;
  CHECK_FALSE(nccl_uses_p2p(t, true));
  CHECK(summarize_fabric(t).intra_shm_edges == 4);
}

TEST_CASE("a ring of SHM hops runs at the host-staged rate x ring_efficiency.shm, stated or the link's fraction") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  Topology t = pcie_box(2, 1, false, CpuVendor::intel);
  const FabricSummary f = summarize_fabric(t);
  CHECK(intra_shm_bound(f, nccl));
  CHECK(host_staged_rate(f, nccl) == Approx(32e9 * nccl.host_staged_fraction_of_link));
  t.intra.host_staged_bytes_per_s = 5.7e9;
  const double shm = 5.7e9 * nccl.ring_efficiency_for("shm", t.gpu.arch);
  // 1 GiB on the ring with Simple: NCCL's latency and the pipeline fill are a few percent of it
  CHECK(one_gib(t, nccl).busbw_bytes_per_s == Approx(shm).epsilon(0.03));
  t.intra.p2p = PcieP2p::all_paths;
  CHECK(one_gib(t, nccl).busbw_bytes_per_s ==
        Approx(32e9 * nccl.ring_efficiency_for("pcie", t.gpu.arch)).epsilon(0.03));
}

TEST_CASE("a ring with P2P and SHM hops runs at the slower of the two") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  Topology t = pcie_box(8, 2, true, CpuVendor::intel);
  const double p2p = 32e9 * nccl.ring_efficiency_for("pcie", t.gpu.arch);
  t.intra.host_staged_bytes_per_s = 10e9;  // SHM binds: 7 GB/s against 25.9
  CHECK(intra_shm_bound(summarize_fabric(t), nccl));
  CHECK(one_gib(t, nccl).busbw_bytes_per_s == Approx(10e9 * nccl.ring_efficiency_for("shm", t.gpu.arch)).epsilon(0.03));
  t.intra.host_staged_bytes_per_s = 60e9;  // the P2P hops bind: 42 GB/s of SHM against 25.9
  CHECK_FALSE(intra_shm_bound(summarize_fabric(t), nccl));
  CHECK(one_gib(t, nccl).busbw_bytes_per_s == Approx(p2p).epsilon(0.03));
}

TEST_CASE("the shipped boxes: a stock GeForce box stages through host memory, its P2P-driver twin does not") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  const Topology stock = load_topology(src("topologies/rtx4090-4x-pcie4.yaml"));
  const Topology patched = load_topology(src("topologies/rtx4090-4x-pcie4-p2p.yaml"));
  CHECK(summarize_fabric(stock).intra_shm_edges == 4);
  CHECK(summarize_fabric(patched).intra_shm_edges == 0);
  CHECK(one_gib(stock, nccl).busbw_bytes_per_s < 0.4 * one_gib(patched, nccl).busbw_bytes_per_s);
  const Topology measured = load_topology(src("topologies/rtx2080ti-2x-pcie3.yaml"));
  CHECK(measured.intra.host_staged_bytes_per_s == Approx(5.70e9));
}

TEST_CASE("through host memory the GPU-side pipeline fill hides behind the slower host staging, as behind a NIC") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  const auto ring_4mib = [&](const Topology& t) {
    return allreduce_cost(4 << 20, summarize_fabric(t), nccl, {Algorithm::ring, Protocol::simple});
  };
  Topology t = pcie_box(4, 1, false, CpuVendor::amd);  // GeForce: every hop through host memory
  t.intra.host_staged_bytes_per_s = 10e9;              // staging at 7 GB/s, the links at 25.9: the fill hides
  REQUIRE(summarize_fabric(t).intra_shm_edges == 4);
  CHECK(ring_4mib(t).fill_s == 0.0);
  t.gpu.pcie_p2p = true;  // the same box peer-to-peer: the links bind, and the fill is paid
  REQUIRE(summarize_fabric(t).intra_shm_edges == 0);
  CHECK(ring_4mib(t).fill_s > 0.0);
}
