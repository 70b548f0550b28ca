// Predicted all-reduce bus bandwidth against the published measurements in validation/reference/
// (entries mapped to a shipped topology), for sizes >= 1 MiB, printing every error.
// Target (issue 3): within 10%. NVLS and the ring use the pipeline fills of data/nccl.yaml (fitted to the H200 and
// A100 nccl-tests sweeps), the tree the fill of its chunk pipeline (NCCL's chunks, not fitted); sweeps timed through
// torch.distributed also pay PyTorch's launch of each call, and an entry
// stating its NCCL release runs with that release's tuning tables; an nccl-tests -g N sweep is no faster than one
// thread's launches on the N GPUs.
#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "../source_dir.hpp"
#include "dpsim/cost.hpp"
#include "dpsim/load.hpp"
#include "dpsim/nccl_release.hpp"
#include "dpsim/sim/simulate.hpp"
#include "dpsim/units.hpp"
#include "dpsim/validation/compare.hpp"
#include "dpsim/validation/reference.hpp"
#include "sim_fixtures.hpp"

using namespace dpsim;

namespace {

// Every mapped busbw number >= 1 MiB of the reference set, as `dpsim validate --reference` reads it (one reader:
// the entry's topology, nodes, GPUs per node, algorithm and message size), to be simulated here.
std::vector<validation::ReferencePoint> load_points() {
  const auto r = validation::score_reference(std::filesystem::path(DPSIM_SOURCE_DIR) / "validation" / "reference");
  std::vector<validation::ReferencePoint> out;
  for (const auto& p : r.points)
    if (p.kind == "allreduce_busbw_mid" || p.kind == "allreduce_busbw_large") out.push_back(p);
  return out;
}

// Known misses: points the model does not reach within 10%, each with its reason. They are printed, not asserted,
// and their number is: a new miss fails, and so does a listed one that the model starts to reach.
// - 3 A100 nodes x 4 HDR at 128 MB (nccl-tests#119): the NIC plateau (96 GB/s) is already reached, but NCCL's ring
//   latency model (2(n-1) hops, x1.4 multi-node Simple "plateau effect", data/nccl.yaml) still charges ~290 us.
// - 8x A100, Galvatron's nccl-tests log, 1..64 MiB: one process drives all 8 GPUs (nGpus 8) and the per-call floor is
//   ~70 us (79 us at 1 MiB), far above NCCL's ring/LL latency (15 us) and the one-thread launch floor (8 x 5.35 us);
//   from 128 MiB the ring plateau and fill fit.
// - 8x V100 (HGX-1, 2019 log, one process driving 8 GPUs): 1..4 MiB under a ~48 us per-call floor (model 15 us);
//   32..64 MiB -11%: this NCCL reaches its plateau earlier than the ring fill fitted on A100 / NCCL 2.18 says.
// - AWS p5 over EFA, 2..32 nodes, 32 MiB..4 GiB (one benchmark repository, aws-ofi-nccl tuner plugin, modelled from
//   its region table, data/tuner_plugins.yaml): where the tuner runs the tree with LL128 (32-256 MiB) +43..+63% with
//   the tree's pipeline fill (1.7-2x without it), NVLSTree on 16-32 nodes +12..+63% (with its chunk pipeline's
//   fill, nvlstree.cpp; +13..+82% without), a few ring/LL128 sizes 10-13% off; 2 nodes (NCCL's own choice) at 32 MiB
//   +17% (+14..+35% below 1 GiB before NVLSTree's fill). 20 points; the rest of the sweep is within 10%.
// - 8x A100 on Azure VMs (NCCL 2.18.5, nccl-tests -g 8) at 1 and 2 MiB: +18/+21%. The floor of one thread's launches
//   (8 x 5.35 us = 42.8 us, data/nccl.yaml single_thread_launch_per_gpu) is fitted to this sweep's 16-256 KiB; at 1-2
//   MiB the measured calls (50.7, 68.5 us) take longer than both the floor and NCCL's ring/LL time.
// - 8x H200 on Azure VMs (NCCL 2.20.5, nccl-tests -g 8) at 1 MiB: -19%. This host launches faster (its 1-128 KiB
//   floor is ~30.8 us, 3.85 us per GPU) than the 5.35 us per GPU of data/nccl.yaml. 1 point.
// The boxes of issue 17 (validation/reference/README.md, "Issue 17's boxes"), every number they publish >= 1 MiB but
// one (the dual-Turin RTX PRO 6000 with NCCL_MIN_NCHANNELS=8, +9.8%):
// - NVLink-bridged pairs: 2x H100 PCIe (nccl#1161, 116 GB/s of a 300 GB/s bridge: +121..+129%), 2x A100 NV12 (208 of
//   300: +29%), 2x RTX 2080 Ti (20-21 GB/s of 50: +72..+112%): each reaches about 0.4-0.7 of its bridge, not the 0.90
//   of data/nccl.yaml ring_efficiency.nvlink_mesh (measured on 8x V100).
// - PCIe through host memory: 4x A100 PCIe on two sockets, every pair SYS, so NCCL's SHM at the source's 10.71 GB/s
//   P2P-disabled copy rate (+18..+68%, +15..+65% before the ring's fill hid behind the staging; +23..+78% when dpsim
//   ran it peer-to-peer). (2x RTX 2080 Ti with P2P off,
//   staged through host memory, is within 3%: data/nccl.yaml ring_efficiency.shm is fitted to it.)
// - 4x RTX 5090 without P2P (nccl-tests#287, GENOA-01, NCCL's SHM; held out): within 10% since the GPU-side fill hides
//   behind the host staging (ring.cpp; 1-16 MiB -11..-13% before), 1 MiB -7.8%, 2-16 MiB -4..-6%, 32-128 MiB -2..-3%.
//   Its host-staged rate is a sibling host's (GENOA-05, 38.24 GB/s). 0 points.
// - PCIe Gen5: 8x RTX PRO 6000 behind switches reach 39-41 GB/s, 0.63-0.65 of Gen5 x16 against the 0.81 measured on
//   Gen4 (+24..+29%); the dual-Turin box with NCCL's default channels at 32 MiB (22.2 GB/s: +86%); 8x RTX 5090 (layout
//   not stated: 4 GPUs +46%, 8 GPUs across the sockets -36%).
// - GB200 NVL72 (coreweave/nccl-tests, issue 17, not fitted): one rack of 72, NVLS, 512 MiB..2 GiB +13..+27%
//   (the fill scaled by NCCL's NVLS loop, channels x heads, still short of this rack's slower ramp; 4-8 GiB +5..+7%);
//   20 racks, 0.5-4 GiB, +159..+408%: the run's algorithm is not stated and its curve is near dpsim's ring, while
//   dpsim picks NVLSTree with every GPU's NIC (+148..+292% with NVLSTree's chunk-pipeline fill: NVLS is its slowest
//   hop, and the racks' 72 NICs make its network hops short). 3 + 4 points. (2x 8 H100 on the same cluster (#92) at
//   8 GiB is within 10%, +4.3%, since NVLSTree keeps one node's NVLS bus bandwidth, nvlstree.cpp; +11.7% before.)
// - 12x V100 of a DGX-2 (wohlbier/nccl-tests, nccl-tests -g 12, NCCL not stated; not fitted): 1..16 MiB (ring/LL,
//   LL128) +18..+41%, 32..128 MiB (ring/Simple) -11..-21%: the measured Simple curve is at its plateau from 32 MiB
//   (no fill beyond the latency), the LL/LL128 ones below it slower than NCCL's tables say. The same signs as the
//   8x V100 HGX-1 sweep above. 8 points; 256 MiB..8 GiB within 6.2%.
// The multi-node sweeps added with issue 17's tree pipeline fill (allreduce-multinode-a100.yaml and
// allreduce-multinode-hopper.yaml; none fitted), 29 points:
// - 4 DGX A100 x 8 HDR (NVIDIA deepops, 2020, NCCL not printed): tree/LL128 at 4 MiB +16% (1-2 and 8-32 MiB within
//   8% with the fill and the double tree's busiest node, +56..+91% without the fill); ring/LL128 at 64 and 128 MiB +15
//   / +41%, where the measured curve dips (120, then 114 GB/s). 3 points.
// - 2 DGX A100 with NCCL_ALGO ring (deepops' Kubernetes page): 1-4 MiB ring/LL and LL128 +22..+33%, the sign of the
//   other ring LL/LL128 mid-size misses above (V100, Azure A100). 3 points.
// - Azure NDmv4, one GPU per node (mscclpp's docs): 18.65 GB/s, 0.75 of the GPU's one 200G NIC (+28.5%). 1 point.
// - OCI A100-40GB over RoCE (oracle-quickstart/oci-hpc-oke and oracle-japan/ocitutorials; NCCL 2.19.3 by the first
//   manifest's image, 2.14.3 and 2.21.5 in the others): at 1-10 GiB two of them reach 220-238 GB/s, above the ring's
//   line rate: their NCCL ran the tree (two nodes' halved traffic) where 2.30.7's model picks the ring (-14..-20%);
//   the first one's tree/LL128 sizes fall between dpsim with the fill (-12..-35%) and without it (+20..+34%). 12
//   points.
// - 4 H100 x 8 x 400G (Voltage Park's benchmark repository, NCCL 2.23.4): tree/LL128 2-8 MiB +22..+41%; NVLSTree
//   16-32 MiB -17..-25% (its chunk-pipeline fill, nvlstree.cpp: a pipeline of 2 chunks pays the first one's 6 hops),
//   256 MiB-8 GiB +11..+30% except 1 GiB (331 GB/s at 8 GiB where dpsim gives 370, and nccl-tests#309's 4 nodes 365;
//   the run dips at 256 MiB). 2 H100 nodes with NCCL_ALGO NVLSTree (nccl-tests#294, Crusoe): within 10% at 128 MiB-2
//   GiB with the fill (+10..+20% without). 10 points.
// - nccl-tests#309's H100 runs of 8 x 400G IB (NCCL 2.26.2 on 2 and 4 nodes, NVIDIA: "Your numbers look good to me!";
//   another user's 2 nodes): NVLSTree's plateau (1-16 GiB) within -2..+1.4% (+5..+8% before NVLSTree kept one node's
//   NVLS bus bandwidth), its 32 MiB-1 GiB within 10% with its
//   chunk-pipeline fill (+11..+35% with the one-node NVLS fill before), its 4-32 MiB -11..-27% (NCCL's latency, 67 us
//   on 2 nodes against the 46-48 us a 2-node H20 NVLSTree log floors at, and every hop of the first chunk where a
//   pipeline holds 1-2 chunks); tree/LL128 at 1-8 MiB -21..+75%. 12 points.
// CoreWeave's 8 H100 nodes with SHARP (CollNetChain, not fitted) are within 10% (-0.3..-6.2%).
constexpr int kKnownMisses = 12 + 20 + 2 + 1 + 12 + 8 + 6 + 7 + 8 + 29 + 12;
bool multinode_sweep_known_miss(const validation::ReferencePoint& p) {
  for (const char* id :
       {"ar-dgx-a100-4node-32gpu-8xhdr-deepops-slurm-sweep", "ar-a100-azure-ndmv4-2node-1gpu-per-node-inplace-1G",
        "ar-a100-40gb-oci-2node-16gpu-roce-oke-sweep", "ar-a100-40gb-oci-2node-16gpu-sriov-vf-nccl2.14.3-1G-10G",
        "ar-a100-40gb-oci-bm-gpu4-8-2node-16gpu-10GiB-nccl2.21.5", "ar-h100-4node-32gpu-voltagepark-sweep",
        "ar-h100-2node-16gpu-crusoe-nvlstree-128M-2G", "ar-h100-2node-16gpu-xe9680-ib400-nccl2262",
        "ar-h100-4node-32gpu-xe9680-vm-ib400-nccl2262", "ar-h100-2node-16gpu-ib400-gjaion-default"})
    if (p.entry == id) return true;
  return p.entry == "ar-dgx-a100-2node-16gpu-8xhdr-deepops-k8s-ring-sweep" && p.bytes <= 4.0 * (1 << 20);
}
bool issue17_known_miss(const validation::ReferencePoint& p) {
  for (const char* id :
       {"ar-h100pcie-2gpu-nvlink-bridge-1to4GiB", "ar-a100-nv12-pair-vs-3gpu", "ar-2x-rtx2080ti-nvlink-bridge-sweep",
        "ar-a100-pcie-40gb-4gpu-2socket-no-nvlink-nccltests-sweep", "ar-rtxpro6000-8gpu-pcie5-3switches-luke",
        "ar-rtxpro6000-8gpu-pcie5-4switches-grimulkan", "ar-rtx5090-8gpu-4gpu-pcie5"})
    if (p.entry == id) return true;
  if (p.entry == "ar-rtx5090-4gpu-genoa-shm-sweep") return p.bytes <= 16.0 * (1 << 20);
  return p.entry == "ar-rtxpro6000-8gpu-pcie5-dual-turin-festr" && p.label.find("default") != std::string::npos;
}
bool known_miss(const validation::ReferencePoint& p) {
  const std::string& id = p.entry;
  if (issue17_known_miss(p) || multinode_sweep_known_miss(p)) return true;
  if (id.rfind("ar-a100-3node-24gpu-4xHDR-128MB", 0) == 0) return true;
  if (id.rfind("ar-v100-sxm2-16gb-8gpu-hybrid-cube-mesh-nccltests-sweep", 0) == 0) return p.bytes <= 64.0 * (1 << 20);
  if (id == "ar-v100-sxm3-dgx2-12gpu-nccltests-sweep-wohlbier") return p.bytes <= 128.0 * (1 << 20);
  if (id.rfind("ar-aws-p5-efa-", 0) == 0) return p.bytes <= 4.0 * (1LL << 30);
  if (id.rfind("ar-azure-nda100v4-8gpu-sweep", 0) == 0) return p.bytes <= 2.0 * (1 << 20);
  if (id == "ar-azure-ndh200v5-8gpu-nvls-sweep-nccl2.20.5") return p.bytes <= 1.0 * (1 << 20);
  if (id == "ar-gb200-nvl72-20rack-coreweave") return true;
  if (id == "ar-gb200-nvl72-1rack-coreweave") return p.bytes <= 2.0 * (1LL << 30);
  return id.rfind("ar-a100-sxm4-40gb-dgx-8gpu-nccltests-sweep-galvatron", 0) == 0 && p.bytes <= 64.0 * (1 << 20);
}

}  // namespace

TEST_CASE("predicted all-reduce busbw within 10% of published measurements (>= 1 MiB)", "[sim][reference]") {
  const auto points = load_points();
  REQUIRE(!points.empty());
  int misses = 0, known_misses = 0;
  for (const auto& p : points) {
    const auto topo_file = resolve_topology(p.topology, std::filesystem::path(DPSIM_SOURCE_DIR) / "topologies");
    Topology t = load_topology(topo_file);
    t.nodes = p.nodes;
    if (p.gpus_per_node > 0) t = keep_first_gpus(t, p.gpus_per_node);  // as a scenario's cluster.gpus_per_node
    Scenario s = test::scenario_on(t, algorithm_named(p.algorithm).value_or(Algorithm::automatic), Protocol::automatic);
    // ... and NCCL's tuning tables of the release the entry states (data/nccl.yaml releases)
    if (!p.nccl_release.empty()) s.nccl = nccl_for_release(s.nccl, p.nccl_release);
    // Methodology parity: a sweep timed through torch.distributed pays PyTorch's launch of each call.
    if (p.torch_timed)
      s.nccl.framework_launch_overhead_s = load_nccl(data_root() / "data" / "nccl.yaml").framework_launch_overhead_s;
    SimOptions o;
    o.overlap = false;
    o.progress = false;
    const auto bytes = static_cast<long long>(p.bytes);
    const StepResult r = simulate(s, test::one_bucket_plan(s.world_size(), bytes), o);
    const int n = s.world_size();
    CollectiveCost call;
    call.time_s = r.buckets[0].end_s - r.buckets[0].start_s;
    // nccl-tests -g N: a call is no faster than one thread's launches on the node's N GPUs (core/cost)
    if (p.single_thread_launch)
      call = launched_from_one_thread(call, CollectiveKind::all_reduce, p.bytes, n, t.gpus_per_node, s.nccl);
    const double busbw = 2.0 * (n - 1) / n * static_cast<double>(bytes) / call.time_s / 1e9;
    const double err = validation::relative_error_to_range(busbw, p.published_low, p.published_high);
    const bool ok = std::abs(err) <= 0.10;
    const bool known = !ok && known_miss(p);
    misses += ok ? 0 : 1;
    std::cout << fmt::format(
        "{:<5} {:<70} {:>10} {:>6}/{:<6} predicted {:8.2f} GB/s measured {:8.2f} GB/s error {:+6.1f}%\n",
        ok      ? "ok"
        : known ? "KNOWN"
                : "MISS",
        p.entry + " " + p.label, format_bytes(p.bytes), r.buckets[0].algorithm, r.buckets[0].protocol, busbw,
        p.published, 100 * err);
    INFO(p.entry << " " << p.label << ": predicted " << busbw << " GB/s, measured " << p.published);
    known_misses += known ? 1 : 0;
    if (!known) CHECK(std::abs(err) <= 0.10);
  }
  std::cout << misses << " of " << points.size() << " points outside 10% (" << known_misses << " known misses)\n";
  CHECK(known_misses == kKnownMisses);
}
