#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "../source_dir.hpp"
#include "dpsim/error.hpp"
#include "dpsim/estimate.hpp"
#include "dpsim/load.hpp"
#include "dpsim/sim/simulate.hpp"
#include "dpsim/sweep_spec.hpp"
#include "dpsim/validation/reference.hpp"

using namespace dpsim::validation;

TEST_CASE("size labels as the reference set prints them") {
  CHECK(parse_size_label("1MiB") == 1048576);
  CHECK(parse_size_label("32KiB") == 32768);
  CHECK(parse_size_label("65K") == 65536);
  CHECK(parse_size_label("132K") == 131072);
  CHECK(parse_size_label("1G") == 1073741824.0);
  CHECK(parse_size_label("8G") == 8589934592.0);
  CHECK(parse_size_label("256B") == 256);
  CHECK(parse_size_label("2to4gpu") == 0);
}

namespace {
const ReferenceReport& report() {
  static const ReferenceReport r = score_reference(std::string(DPSIM_SOURCE_DIR) + "/validation/reference");
  return r;
}
ErrorStats stats(const std::string& cls, const std::string& kind) {
  for (const auto& row : summarize(report()))
    if (row.group == cls && row.kind == kind) return row.stats;
  FAIL("no summary row for " << cls << " / " << kind);
  return {};
}
}  // namespace

// The errors the model reaches today against the published set (validation/README.md has the table).
// A change that moves any of these must update this test and the README together.
TEST_CASE("reference set: every entry is scored or skipped with a reason") {
  const auto& r = report();
  // 152 + issue 17's Blackwell file (GB200 NVL72 x2, B200 and H100 two-node) + the DGX-2 sweep + BLOOM 176B + the
  // two torchtitan rows + issue 17's multi-node sweeps (14 A100 entries, 14 H100; 13 of them unmapped) + nccl#1801's
  // GB200 partitions on 3 racks + memory-outcomes.yaml's 9 + Megatron-LM 2019's Figure 5 + Megatron-Bridge's Llama 3
  // 70B on 64 H100 + Korthikanti et al. 2022's 530B on 2240 A100 + Megatron-Bridge's Llama 3.1 405B on 1024 H100
  // (context parallelism)
  CHECK(r.entries == 203);
  std::set<std::string> seen;
  for (const auto& p : r.points) seen.insert(p.entry);
  for (const auto& m : r.memory) seen.insert(m.entry);  // memory_outcome entries score only their memory
  for (const auto& s : r.skipped) {
    CHECK_FALSE(s.reason.empty());
    seen.insert(s.entry);
  }
  CHECK(seen.size() == 203);
  for (const auto& p : r.points) {
    CHECK(p.predicted > 0);
    CHECK(p.published > 0);
  }
}

namespace {
struct Reached {
  const char* cls;
  const char* kind;
  int count;
  double median_abs, worst_abs;
};
}  // namespace

TEST_CASE("reference set: errors per interconnect class as reached") {
  const Reached reached[] = {
      // NVSwitch, all-reduce busbw >= 256 MiB (H100/H200/A100 nccl-tests and torch sweeps): NVLS and ring plateaus,
      // A100 at its own NVLink3 ring efficiency (data/nccl.yaml ring_efficiency.by_arch); NVLS forced on 2-4 GPUs:
      // not available, not counted
      // With issue 17's 8x H800 (nccl#1374, 215 GB/s through NVLS on a 200 GB/s link): -4.5%
      // GB200 NVL72, one rack of 72 (coreweave/nccl-tests#43, not fitted): NVLS +27/+20/+13/+5/+7% at 0.5..8 GiB
      // 12 V100s of a DGX-2 (wohlbier/nccl-tests, -g 12; not fitted): 256 MiB..8 GiB -6.2..-0.7% (plateau 0.82 x 150)
      {"nvswitch", "allreduce_busbw_large", 65, 0.0241, 0.2664},
      // NVSwitch, 1 MiB..256 MiB: NVLS and ring pipeline fills (the DGX H100 sweep, not fitted, within 5.2%); worst:
      // A100 per-call floors far above NCCL's LL latency (Azure VMs ~43 us; Galvatron's log, one process driving 8
      // GPUs: 79 us at 1 MiB). A bare-metal A100 log (not citable) floors at 18-24 us: no Ampere latency is shipped.
      // Issue 17's release tables: the Azure H200 sweep (NCCL 2.20.5) runs NVLS at 2.19's 23 us, not 25 (the NVLS fill
      // was fitted with 25): its 2..33 MiB move +1..+5 points, the median 2.85% -> 3.45%.
      // The DGX-2 V100 sweep: 1..16 MiB (ring/LL, LL128) +18..+41%, 32..128 MiB (ring/Simple) -11..-21%: the measured
      // curve has no fill beyond its latency once Simple runs (32 MiB: 565.7 us for 33.5 MB at the 123.6 GB/s
      // plateau); the V100 DGX-1 sweep shows the same signs (+45% at 1-2 MiB, -9..-12% at 16-128 MiB). The ring fill
      // (data/nccl.yaml ring_fill) is A100's. Known misses: 4.0% median
      // A host launch cost of 5.35 us per GPU (was 4.2; data/nccl.yaml single_thread_launch_per_gpu, fitted to the
      // Azure
      // A100 sweep): Galvatron's 1 MiB +119% -> +91%
      {"nvswitch", "allreduce_busbw_mid", 56, 0.0403, 0.9137},
      // NVSwitch < 1 MiB (issue 17): 21.3% -> 16.1% with nccl-tests -g 8's one-thread launch floor (8 x 4.2 us) on the
      // Azure A100 / H200 sweeps (NCCL 2.18.5, 2.20.5; within -7..-11% on H200, +25..+42% on A100: its floor is
      // ~45 us). 16.1% -> 9.6% with a small ring/LL call's channels and threads (data/nccl.yaml ll_call_channels,
      // fitted to the H200 2.30.7 sweep's 32-512 KiB): the held-out DGX H100 sweep's 1-128 KiB from +8..+25% to
      // -6..+7% (4 KiB stays +29%), the H200 torch.distributed sweep's 32-128 KiB from +23..+27% to +13..+16%
      // The DGX-2 V100 sweep (-g 12: floor 12 x 4.2 = 50.4 us against the log's ~61 us): 1..512 KiB +24..+51%
      // Scored against what a log row's two printed decimals allow (busbw +-0.005 GB/s; 0.03 is 0.025-0.035): 12.3% ->
      // 9.6%
      // The one-thread floor at 8 x 5.35 us (fitted to the Azure A100 sweep's 16..256 KiB): 9.6% -> 4.0%; the Azure
      // A100
      // sweep +25..+42% -> within 4%, the held-out DGX-2 V100 sweep (-g 12) 23.2% -> 0.8%, the held-out Azure H200
      // sweep
      // (-g 8, its host launches at ~3.85 us) -7..-11% -> -28..-30%
      {"nvswitch", "allreduce_busbw_small", 56, 0.0400, 0.3022},
      // V100 NVLink mesh (HGX-1 sweep, OCI 1 GiB point): plateau within 2.3% (ring_efficiency.nvlink_mesh comes from
      // the OCI point); 8..128 MiB within 12%; 1..4 MiB under the log's ~48 us per-call floor (+19..+45%). Issue 17's
      // NVLink-bridged pairs reach 0.4-0.7 of their bridge: 2x H100 PCIe +121..+129%, 2x A100 NV12 +29%, 2x RTX 2080 Ti
      // +72..+112% (validation/reference/README.md, "Issue 17's boxes")
      {"nvlink_mesh", "allreduce_busbw_large", 5, 1.2100, 1.2887},
      {"nvlink_mesh", "allreduce_busbw_mid", 16, 0.5857, 1.1179},
      // < 1 MiB (issue 17): the V100 log is nccl-tests -g 8, one thread: its floor 8 x 4.2 = 33.6 us against the
      // log's 48.5 us (+33..+79% busbw, -31% time; NCCL of 2019 launched with cudaLaunchCooperativeKernelMultiDevice,
      // replaced since by plain launches, sjeaugey in nccl#787: not modelled);
      // the 2x RTX 2080 Ti bridge (-g 2) stays +140..+239%: 198.4% -> 57.3%
      // (the printed decimals' +-0.005 GB/s: 57.3% -> 56.9%)
      // With 5.35 us per GPU (held out): the V100 log 46.5% -> 14.0%; 56.9% -> 23.2%
      {"nvlink_mesh", "allreduce_busbw_small", 17, 0.2320, 2.3813},
      {"nvlink_mesh", "allreduce_latency", 5, 0.1172, 0.1251},
      // PCIe (4x RTX 4090): the data/nccl.yaml efficiency comes from this entry (within 0.9%). With issue 17's boxes:
      // 4x A100 PCIe with 8-10 GB/s P2P (+23..+78%), 8x RTX PRO 6000 on PCIe Gen5 (+10..+86%), 8x RTX 5090 (+46% /
      // -36%). 2x RTX 2080 Ti without P2P was unmapped: NCCL stages through host memory (SHM).
      // NCCL's SHM transport (issue 17: core/cost nccl_uses_p2p, data/nccl.yaml ring_efficiency.shm fitted to the 2x
      // RTX 2080 Ti's 1 GiB): that box mapped, 512 KiB..1 GiB within 3%; 4x RTX 5090 without P2P (nccl-tests#287, held
      // out) 1-128 MiB -5..-13%; the 4x A100 PCIe box (every pair SYS) runs SHM at its source's P2P-disabled rate,
      // +23..+78% -> +15..+65%; the 8x RTX 5090 of nccl#1639 (GeForce, no host rate stated: the link's fraction)
      // +46% / -36% -> -55% / -43%; the RTX PRO 6000 boxes stay peer-to-peer (their source sets NCCL_P2P_LEVEL=SYS)
      {"pcie", "allreduce_busbw_large", 12, 0.1671, 0.8592},
      {"pcie", "allreduce_busbw_mid", 20, 0.0531, 0.6836},
      // < 1 MiB: 4x A100 PCIe, -g 4 (one thread: floor 4 x 4.2 us = 16.8 us against the log's ~23 us, weak P2P beyond
      // it): busbw 53.5% -> 46.3%, time 45.6% -> 27.5% (issue 17)
      // NCCL's LL128 default only where the ranks talk over NVLink (tuning.cc 2.30.7:531): PCIe-only nodes run
      // Simple/LL
      // at 128-512 KiB, median 46.3% -> 40.7%
      // (the printed decimals' +-0.005 GB/s: 40.7% -> 35.4%)
      // With 5.35 us per GPU (held out; the log floors at ~23.2 us = 4 x 5.8): 35.4% -> 13.7%
      // With NCCL's SHM and the 2x RTX 2080 Ti and 4x RTX 5090 sweeps' small sizes: 13.7% -> 13.1% (the 5090's 16-64
      // KiB +44..+52%: its host launches at ~3.9 us per GPU, and NCCL's ring/LL on PCIe is faster than it ran)
      {"pcie", "allreduce_busbw_small", 32, 0.1315, 0.5186},
      {"pcie", "allreduce_latency", 8, 0.1066, 0.3969},
      // Every class < 1 MiB (issue 17): busbw 50.3% -> 27.1% -> 26.9% (ll_call_channels), time 44.2% -> 16.0%
      // With the DGX-2 V100 sweep: 26.9% -> 26.0% (86 numbers), time 16.0% -> 16.8% (its 8..128 B at -16..-17%)
      // With the multi-node A100 and H100 sweeps (allreduce-multinode-a100.yaml, -hopper.yaml): 26.0% -> 28.0% (98
      // numbers: their 32-512 KiB ring/LL and tree/LL +13..+131%), time 16.8% -> 16.7%; with nccl-tests#309's H100
      // runs 25.6% (123 numbers), time 16.4% (47)
      // Every log row's busbw scored against its two printed decimals (+-0.005 GB/s): 25.6% -> 21.6% (multi-node 24.3%
      // -> 22.9%)
      // The one-thread floor at 5.35 us per GPU (fitted to the Azure A100 sweep): 21.6% -> 11.7%; over the 113 numbers
      // of the other entries 17.0% -> 13.5%; time 16.4% -> 11.3%
      // With the SHM sweeps' small sizes (2x RTX 2080 Ti, 4x RTX 5090): 11.7% over 142 numbers
      {"all", "allreduce_busbw_small", 142, 0.1166, 2.3813},
      {"all", "allreduce_latency", 51, 0.1168, 0.7795},
      // Multi-node: 1 GPU per node tree sweep (H100, 2 MiB..32 MiB), 3 A100 nodes x 4 HDR at 128 MB (NCCL's ring
      // latency still charged on the NIC plateau), 2 DGX A100 x 8 HDR (192 GB/s)
      // Issue 17's multi-node sweeps (DGX A100 on 2 and 4 nodes, OCI A100 over RoCE, 4 H100 nodes; not fitted) and the
      // tree's chunk-pipeline fill (core/algorithms/tree.cpp): without the fill 41 numbers at 22.5% median, worst
      // +94% (tree/LL128 +23..+94% on 4 nodes); with it 10.1%, worst +41% (the H100 sweep's 2 MiB; the OCI tree sizes
      // -12..-35%: their NCCL ran the tree where dpsim's picks it too, slower than dpsim says with the fill and faster
      // than without). nccl-tests#309's H100 runs (2 and 4 nodes): NVLSTree's 16-512 MiB +11..+35% and tree/LL128 at
      // 1-8 MiB -33..+75%: 10.1% -> 15.3% (65 numbers), worst +74.7%. NVLSTree's chunk-pipeline fill
      // (core/algorithms/nvlstree.cpp, not fitted): its 16-512 MiB on 2 and 4 H100 nodes from +11..+47% to -24..+33%
      // (the 2-node runs within 10% from 16 MiB), 4-32 MiB -11..-27%: 15.3% -> 8.3%; the double tree's busiest node
      // (2 S from 4 nodes, a little above the ring's 2(n-1)/n S): 8.2%. NVLSTree keeping one node's NVLS bus bandwidth
      // (tuning.cc's intraBw, not fitted): the 2-node H100 runs' 8-64 MiB 2-5 points lower: 8.3%
      {"multinode", "allreduce_busbw_mid", 65, 0.0830, 0.7473},
      // issue 17's Blackwell file: 2x 8 B200 +3.8%, 2x 8 H100 +12.1% (coreweave/nccl-tests#92), and 20 GB200 NVL72
      // racks
      // +159..+408% (#48: the run's algorithm is not stated; its curve is near dpsim's ring, dpsim picks NVLSTree)
      // The multi-node sweeps: 2-node rings of A100 within 4% (deepops, Azure NDmv4, OCI at NCCL 2.25-2.29); OCI runs
      // whose NCCL ran the tree above the ring's line rate -14..-20%; H100 NVLSTree on 2 and 4 nodes +10..+47%: median
      // 159% (7 numbers) -> 8.4% (47); nccl-tests#309's H100 NVLSTree plateaus on 2 and 4 nodes +5..+8% and CoreWeave's
      // 8 H100 nodes with SHARP (CollNetChain) -0.3..-6.2%: 6.0% (72). NVLSTree's chunk-pipeline fill: the H100
      // NVLSTree runs' 256 MiB-1 GiB +8..+47% -> +4..+33%, the 20 GB200 racks +159..+408% -> +148..+292% (NVLS is
      // their slowest hop; 72 NICs a rack make the network hops short): 5.1%. nccl#1801's GB200 partitions on 3 racks
      // over IB (NVLS off): ring -2.5/-2.8%, tree -0.0/+0.5% with the double tree's busiest node (1.5 S on 3 nodes;
      // -18/-21% with the ring's traffic); the 4-node H100 NVLSTree plateaus +4.6 -> +1.3% (#309), +15 -> +12%
      // (Voltage Park): 5.0% (76). NVLSTree keeps one node's NVLS bus bandwidth over the ranks of every node
      // (tuning.cc:310-323 and :376-379; nvlstree.cpp, not fitted): the NVLS-bound 2-node H100 plateaus +5..+12% ->
      // -2..+4% (#309, Crusoe, CoreWeave): 2.1%
      {"multinode", "allreduce_busbw_large", 76, 0.0210, 2.8766},
      // 2 A100 x 1 GPU over HDR, 8..64 B: the model's floor is 16.6 us (issue 17: with one GPU per node NCCL prices the
      // ring's network steps at the tree's NET row, tuning.cc:386; 12 us before), measured ~19-20 us (-13..-20%);
      // 2 H20 nodes, NCCL_ALGO=NVLSTree (nccl#1244, NCCL 2.21.5), 4..512 B: with 2.21.5's tables (NET NVLSTree 14 us,
      // v2.21.5-1 tuning.cc:77; 20.9 from 2.28.9) NCCL's latency is 25 + 2 x 14 = 53 us against 46-48 us (+11..+15%;
      // 2.30.7's 66.8 us gave +40..+44%)
      // With the multi-node sweeps' 4-64 B rows: DGX A100 rings within 6%, OCI RoCE -31..-36% (25 us predicted, 37-39
      // measured), 4 H100 nodes -8%; nccl-tests#309's H100 runs' 8-256 B take 69-108 us against 25-35 us (-58..-67%)
      {"multinode", "allreduce_latency", 30, 0.1348, 0.6723},
      // AWS p5 over EFA, 4..32 nodes (one benchmark repository, aws-ofi-nccl tuner plugin), 32 MiB..8 GiB: the 8 GiB
      // plateau is where ring_efficiency.efa is fitted (within 1% at 4..16 nodes, +10% at 32); below it the measured
      // busbw was 1.2-2x lower, in size steps (the tuner's, below). p5en at 16 nodes, 16 GiB (not fitted): -4%.
      // Issue 17 (Simple pays the plugin's latency twice, NVLSTree across nodes): large 19.2% -> 14.8%.
      // aws-ofi-nccl's region tuner (data/tuner_plugins.yaml; ring/LL128 where NCCL's own model picked NVLSTree or
      // tree on 3+ instances): large 14.8% -> 6.4%, mid mean +75% -> +64%; then the 2-instance sweep mapped (NCCL's
      // own choice there, +3..+42%): large 25 -> 31 points, 7.1%; mid 12 -> 15. Left: tree/LL128 at 32-256 MiB on
      // 8-32 instances, 1.7-2x the measured busbw. p5en's table (16 instances, 16 GiB: ring/Simple): -4.3% -> -7.2%.
      // The tree's chunk-pipeline fill (issue 17, not fitted): the tuner's tree/LL128 sizes +71..+100% -> +43..+63%,
      // the
      // 2-node 32 MiB +42% -> +3%; large 95.8% -> 82.5% worst (a 512 MiB tree point); mid 74.6% -> 48.1%
      // NVLSTree's chunk-pipeline fill: the 2-instance sweep's 128-512 MiB +14..+17% -> -4..+7%, the 32-instance
      // NVLSTree sizes +44/+83% -> +35/+63%: large 7.2% -> 6.4%, worst 82.5% -> 63.0%. NVLSTree at one node's NVLS bus
      // bandwidth: the 2-instance sweep's 128 MiB-8 GiB -0..+8% -> -5..+2%: 4.8%
      {"multinode_efa", "allreduce_busbw_large", 31, 0.0478, 0.6212},
      // the double tree's busiest node from 4 instances (2 S): the tree/LL128 sizes a point or two lower, 48.1%
      // -> 47.2%
      {"multinode_efa", "allreduce_busbw_mid", 15, 0.4715, 0.6280},
      // DDP on the V100 mesh: 8-GPU speedups (BERT-large, ResNet-50 FP32 within 3%; AMP +15%: the measured loss is
      // outside DDP), ResNet-50 step time on 1..8 V100 (within 3.2%: issue 15's per-shape GEMMs), ResNet-50
      // throughput (FP32 -6..-12%, AMP +9..+29%; the median moved 9.6% -> 10.5% with issue 15: the FP32 numbers,
      // under-predicted before, went further down with the foreach SGD and the quantized GEMMs; AMP improved)
      {"nvlink_mesh", "ddp_scaling", 8, 0.0281, 0.1512},
      // Issue 15's second pass (the GEMM fixed time, the residual adds) moved step time 1.9% -> 1.2% and throughput
      // 10.5% -> 10.7%. The V100's GEMM efficiency measured (0.76, zzc0721/torch-performance-test-data; 0.75 was an
      // assumption): step time 1.2% -> 1.9% (the 1-8 GPU steps +1.1..-2.3% -> +0.1..-3.2%), throughput 10.7% -> 9.9%.
      {"nvlink_mesh", "ddp_step_time", 4, 0.0188, 0.0319},
      // Autocast (training.compute_dtype: the AMP rows run fp32 models under torch.autocast): the weight casts moved
      // the
      // AMP throughputs down 0.4%: worst 28.5% -> 28.1%.
      {"nvlink_mesh", "ddp_throughput", 8, 0.0989, 0.2853},
      // DGX A100 ResNet-50 (AMP, TF32): speedups +3% (TF32) / +18% (AMP); throughput over-predicted 28-75%: the
      // GPU's one GEMM efficiency is far above what ResNet's convolutions reach, and no input pipeline is modelled
      {"nvswitch", "ddp_scaling", 2, 0.1099, 0.1845},
      // (autocast: the AMP rows' weight casts, median 58.3% -> 57.7%). training.memory_format: the TF32 rows run in
      // DeepLearningExamples' default NCHW, whose tensor-core convolutions cuDNN transposes (AMP runs NHWC): TF32
      // +67.5% / +73.0% -> +13.7% / +17.5%; median 57.7% -> 21.2%, worst 73.0% -> 47.8% (AMP 8 GPUs, the input
      // pipeline)
      {"nvswitch", "ddp_throughput", 4, 0.2120, 0.4781},
      // BERT-large strong scaling on 2..32 DGX A100 nodes (seq 128 / 512, AMP / TF32): within 5% except TF32 seq 512
      // at 16 and 32 nodes (+12%, +27%: the source loses 22% there, more than any all-reduce on 8x HDR explains)
      {"multinode", "ddp_strong_scaling", 20, 0.0102, 0.2631},
      // llm-foundry MPT 125M..70B, FSDP FULL_SHARD on A100 40/80GB (issues 14 and 15; held out: no constant is fitted
      // to them). flash1 at the FlashAttention-2 paper's FlashAttention bars by sequence length and head size, and
      // Composer's reduce-scatter in every micro-step: the 2k rows +8% (30b) to +43% (1b on 32 GPUs) and +59% (70b on
      // 64x 40GB), the 64k rows -13% (7b) and +4% (125m).
      // With them, the 37 single-node H100 rows of the table "H100 80GB BF16" (e2e-fsdp-h100.yaml; the flash1 scale
      // is fitted to 4 of them, data/gpus.yaml): seq >= 32k within -3..+6%, seq <= 1k still +35..+50% (the per-token
      // GEMM and memory-bound work is too cheap on H100; not found in a source). PyTorch's LayerNorm and GELU kernels
      // at their time measured on one H200 (data/gpus.yaml kernels.native_kernel_time_factor) took the medians
      // 15.4% -> 12.4% (nvswitch) and 17.5% -> 12.1% (multinode), the worst 48.9% -> 46.1% and 58.8% -> 56.2%.
      {"nvswitch", "e2e_tokens_per_gpu", 51, 0.1237, 0.4606},
      // With Megatron-Bridge's Llama 3.1 405B on 1024 H100 (t8 p8 c2 v8, FP8; held out): -3.0%.
      {"multinode", "e2e_tokens_per_gpu", 18, 0.1168, 0.5625},
      // Megatron-LM on 32-3072 A100 80GB (Narayanan et al. 2021 Tables 1 and 2; held out: nothing is fitted to them),
      // TFLOP/s per GPU by the paper's equation (3): within 2% without tensor parallelism, +5..+10% with it (t 4-8):
      // the
      // same direction as the 8-GPU Megatron-LM 2019 point (test_megatron.cpp)
      // BLOOM 176B (BigScience tr11: t4 p12 d8 on 384 A100 80GB, Megatron-DeepSpeed; held out): +20.2%, its
      // Omni-Path links assumed at 100 Gb/s (at 25 Gb/s per GPU it would still be +11%)
      {"multinode", "e2e_hardware_tflops_per_gpu", 17, 0.0755, 0.1987},
      // torchtune's Llama 3.1 8B LoRA and QLoRA on one RTX 4090 (e2e-lora.yaml, issue 22; held out): -31% and -15%
      // with an assumed GEMM efficiency of 0.75; with the RTX 4090's measured torch.matmul (1.0 of its rated peak,
      // zzc0721/torch-performance-test-data, nothing from these rows) -16.0% and +2.6%
      {"pcie", "e2e_tokens_per_gpu", 2, 0.0930, 0.1600},
      // Megatron-LM 2019's weak scaling on DGX-2H V100 (Shoeybi et al. Figure 5, e2e-megatron-tp-pp.yaml; only the
      // baseline's 39 TFLOP/s is fitted): every point over-predicted, tensor 2 / 4 / 8 by +1.4 / +7.3 / +5.0%, with
      // data 64 +3.1 / +15.0 / +9.3 / +5.9% (the figure's 128-GPU point loses 13% to data parallelism, the others 4%).
      // The code's README: Megatron's own DDP (one all-reduce of the flattened gradients after the backward) is the
      // default, and torch's made the 64- and 128-GPU configurations slower: those two as the own DDP runs them, +1.9 /
      // +11.2%; its 512-GPU run with the own DDP, "60%", is +17.2% (70.3%): dpsim's data-parallel all-reduce on this
      // cluster takes about half what 60 -> 74 implies (0.34 s against ~0.68 s; validation/README.md)
      {"nvswitch", "e2e_weak_scaling", 3, 0.0502, 0.0731},
      {"multinode", "e2e_weak_scaling", 5, 0.0934, 0.1715},
      // Korthikanti et al. 2022's 530B on 2240 A100 (its abstract's two MFUs; the layout assumed from Narayanan et al.
      // 2021's 530B; held out): 54.2% with sequence parallelism and selective recomputation +1.4%, 42.1% with full
      // recomputation +0.1%, with the 2022 code's asynchronous backward tensor-parallel calls (tp_comm_overlap
      // backward; with every call blocking -3.9% and -3.1%)
      {"multinode", "e2e_mfu_pct", 2, 0.0073, 0.0137},
  };
  for (const Reached& r : reached) {
    INFO(r.cls << " / " << r.kind);
    const ErrorStats got = stats(r.cls, r.kind);
    CHECK(got.count == r.count);
    CHECK(got.median_abs == Approx(r.median_abs).margin(0.001));
    CHECK(got.worst_abs == Approx(r.worst_abs).margin(0.001));
  }
}

TEST_CASE("reference set: the issue's targets, as reached") {
  const auto t = check_targets(report());
  REQUIRE(t.size() == 8);
  CHECK(t[0].value == Approx(0.0426).margin(0.001));  // busbw >= 1 MiB median (361 numbers): target 4% (issue 17;
                                                      // issue 5's 5%), MISSED since
                                                      // issue 17's multi-node sweeps (4.4% before the ring's fill hid
                                                      // behind SHM staging; 5.1% before NVLSTree kept one
                                                      // node's NVLS bus bandwidth; 6.5% before NVLSTree's chunk-
                                                      // pipeline fill; 5.8% over 294 with the A100 and first H100
                                                      // ones; 4.8% over the 221 before them; 4.5% over 207 before
                                                      // the DGX-2 V100 sweep; 4.3% over 196 before issue 17's
                                                      // Blackwell file; 3.1% over the 159 before issue 17's boxes)
  CHECK_FALSE(t[0].met);
  CHECK(t[1].value == Approx(2.8766).margin(0.001));  // worst: target 15%, missed (20 GB200 NVL72 racks: +288%;
                                                      // H100 PCIe NVLink-bridge pair: +129%; A100 per-call floors at
                                                      // 1-16 MiB: +119%)
  CHECK_FALSE(t[1].met);
  CHECK(t[2].points == 142);
  CHECK(t[2].value == Approx(0.1165).margin(0.001));  // busbw < 1 MiB median: target 15% (issue 17), met since the
                                                      // one-thread floor's 5.35 us (21.6% with 4.2 us; 13.5% over
                                                      // the entries it was not fitted to)
  CHECK(t[2].met);
  CHECK(t[3].value == Approx(0.0300).margin(0.001));  // DDP median (46 numbers): target 8%, met
  CHECK(t[3].met);
  CHECK(t[4].value == Approx(0.0914).margin(0.001));  // end-to-end throughput per GPU median (98): target 10%, met
                                                      // (9.6% over the 86 before Megatron-LM 2019's Figure 5)
  CHECK(t[4].met);  // (12.0% before PyTorch's LayerNorm and GELU kernels ran at their measured time)
  CHECK(t[5].value == Approx(0.5617).margin(0.001));  // worst: target 25%, missed (70b on 64x 40GB, +56%)
  CHECK_FALSE(t[5].met);
  CHECK(t[6].points > 80);  // every configuration a DDP or end-to-end entry predicts ran, and each fits: met
  CHECK(t[6].value == 0.0);
  CHECK(t[6].met);
  CHECK(t[7].points == 8);  // memory-outcomes.yaml's out-of-memory reports: none predicted to fit, met
  CHECK(t[7].value == 0.0);
  CHECK(t[7].met);
}

TEST_CASE("reference CSV and gnuplot script") {
  const std::string csv = reference_csv(report());
  CHECK(csv.rfind("entry,file,class,kind,", 0) == 0);
  CHECK(csv.find("ar-rtx4090-4gpu-pcie-p2p-patched") != std::string::npos);
  const std::string gp = gnuplot_script(report(), "/tmp/p.csv", "/tmp/p.svg");
  CHECK(gp.find("set terminal svg") != std::string::npos);
  CHECK(gp.find("set logscale xy") != std::string::npos);
  CHECK(gp.find("1.1*x") != std::string::npos);
  CHECK_THROWS(gnuplot_script(report(), "/tmp/p.csv", "/tmp/p.pdf"));
}

namespace {
// An empty reference folder of its own under the temporary directory.
std::filesystem::path fresh_reference_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("dpsim-ref-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// A one-entry reference folder whose DDP entry predicts with `predict` (YAML, indented under scenario:).
std::filesystem::path one_ddp_entry(const std::string& name, const std::string& predict) {
  const auto dir = fresh_reference_dir(name);
  std::ofstream(dir / "ddp.yaml") << "- id: t\n"
                                     "  kind: ddp_step_time\n"
                                     "  measured:\n"
                                     "    sec_per_iter: {1gpu: 0.1, 8gpu: 0.104}\n"
                                     "  scenario:\n"
                                     "    topology: v100-8x-nvlink-mesh\n"
                                  << predict;
  return dir;
}
const std::string kScenario =
    std::string(DPSIM_SOURCE_DIR) + "/validation/reference/scenarios/pytorch-ddp-benchmark-resnet50-v100.yaml";
std::string error_of(const std::filesystem::path& dir) {
  try {
    score_reference(dir);
  } catch (const dpsim::InputError& e) {
    return e.what();
  }
  return "(no error)";
}
// kScenario's predict block: number "one" on 1 GPU, then `second` (its label, kind, measured and set).
std::string one_gpu_then(const std::string& second) {
  return "    predict:\n      scenario: " + kScenario +
         "\n      numbers:\n"
         "        - {label: one, kind: ddp_step_time, measured: [sec_per_iter, 1gpu], set: {cluster.gpus_per_node: "
         "1}}\n"
         "        - {label: " +
         second + "}\n";
}
}  // namespace

TEST_CASE("reference set: a DDP entry's predict block names the scenario and overrides of each number") {
  const auto dir = one_ddp_entry("ok", one_gpu_then("eight, kind: ddp_step_time, measured: [sec_per_iter, 8gpu]"));
  const ReferenceReport r = score_reference(dir);
  REQUIRE(r.points.size() == 2);
  CHECK(r.points[0].gpus_per_node == 1);
  CHECK(r.points[1].gpus_per_node == 8);
  CHECK(r.points[0].published == 0.1);
  // The same scenarios as the shipped entry's 1M/1G and 1M/8G numbers: the same predictions.
  for (const auto& shipped : report().points) {
    if (shipped.entry != "ddp-dgx1-v100-resnet50-bs32-1to16gpu") continue;
    if (shipped.label == "1M/1G s/iter") CHECK(shipped.predicted == r.points[0].predicted);
    if (shipped.label == "1M/8G s/iter") CHECK(shipped.predicted == r.points[1].predicted);
  }
  CHECK(r.points[1].predicted > r.points[0].predicted);  // 8 GPUs pay the all-reduce
}

TEST_CASE("reference set: a published run dpsim predicts not to fit in memory misses the memory target, named") {
  const auto dir = one_ddp_entry("oom", one_gpu_then("huge, kind: ddp_step_time, measured: [sec_per_iter, 8gpu], set: "
                                                     "{training.micro_batch: 4096, training.activations: true}"));
  const ReferenceReport r = score_reference(dir);
  REQUIRE(r.memory.size() == 2);  // one per configuration
  CHECK(r.memory[0].fits);
  CHECK_FALSE(r.memory[1].fits);
  CHECK(r.memory[1].label == "huge");
  CHECK(r.memory[1].needed_bytes > r.memory[1].gpu_bytes);
  const TargetCheck memory = check_targets(r).at(6);
  CHECK(memory.value == 0.5);
  CHECK_FALSE(memory.met);
  const std::string text = render_reference(r);
  CHECK(text.find("t (ddp.yaml, huge) ran, but dpsim predicts") != std::string::npos);
  CHECK(text.find("predicted not to fit in GPU memory (2 configurations): 50.0% (target <= 0%) MISSED") !=
        std::string::npos);
}

namespace {
// One memory_outcome entry: kScenario with `set`, published as `outcome`.
std::filesystem::path one_memory_entry(const std::string& name, const std::string& outcome, const std::string& set) {
  const auto dir = fresh_reference_dir(name);
  std::ofstream(dir / "memory.yaml") << "- id: m\n"
                                        "  kind: memory_outcome\n"
                                        "  measured:\n"
                                        "    outcome: "
                                     << outcome
                                     << "\n"
                                        "  scenario:\n"
                                        "    topology: v100-8x-nvlink-mesh\n"
                                        "    predict:\n      scenario: "
                                     << kScenario << "\n      set: " << set << "\n";
  return dir;
}
const std::string kHuge = "{training.micro_batch: 4096, training.activations: true}";
}  // namespace

TEST_CASE("reference set: a configuration published as out of memory must be predicted not to fit") {
  SECTION("predicted not to fit: agrees, the target is met") {
    const ReferenceReport r = score_reference(one_memory_entry("oom-agrees", "out_of_memory", kHuge));
    REQUIRE(r.memory.size() == 1);
    CHECK(r.memory[0].published_oom);
    CHECK_FALSE(r.memory[0].fits);
    CHECK(r.memory[0].agrees());
    CHECK(r.points.empty());  // nothing timed
    const TargetCheck oom = check_targets(r).back();
    CHECK(oom.points == 1);
    CHECK(oom.met);
    CHECK(check_targets(r).at(6).points == 0);  // no run published as running
    CHECK(render_reference(r).find("ran out of memory, but") == std::string::npos);
  }
  SECTION("predicted to fit: the target is missed and the run named") {
    const ReferenceReport r = score_reference(one_memory_entry("oom-wrong", "out_of_memory", "{}"));
    REQUIRE(r.memory.size() == 1);
    CHECK(r.memory[0].fits);
    CHECK_FALSE(r.memory[0].agrees());
    const TargetCheck oom = check_targets(r).back();
    CHECK(oom.value == 1.0);
    CHECK_FALSE(oom.met);
    const std::string text = render_reference(r);
    CHECK(text.find("m (memory.yaml, configuration) ran out of memory, but dpsim predicts") != std::string::npos);
    CHECK(text.find("published out-of-memory reports predicted to fit (1 configurations): 100.0% (target <= 0%) "
                    "MISSED") != std::string::npos);
  }
  SECTION("published as running: must fit, as an end-to-end run") {
    const ReferenceReport r = score_reference(one_memory_entry("ran", "ran", kHuge));
    REQUIRE(r.memory.size() == 1);
    CHECK_FALSE(r.memory[0].agrees());
    CHECK_FALSE(check_targets(r).at(6).met);
  }
  SECTION("an outcome that is neither, or a predict block with numbers, names the file, line and key path") {
    const std::string msg = error_of(one_memory_entry("oom-bad", "crashed", "{}"));
    CHECK_THAT(msg, Catch::Contains("memory.yaml:4: [0].measured.outcome: measured.outcome must be out_of_memory or "
                                    "ran (what the source reports), got \"crashed\""));
    const std::string numbers = error_of(one_memory_entry("oom-numbers", "out_of_memory", "{}\n      numbers: []"));
    CHECK_THAT(numbers, Catch::Contains("memory.yaml:10: [0].scenario.predict.numbers: unknown key \"numbers\""));
  }
}

TEST_CASE("reference set: a malformed predict block names the file, line and key path") {
  const std::string head = "    predict:\n      scenario: " + kScenario + "\n      numbers:\n";
  SECTION("unknown kind") {
    const std::string msg = error_of(
        one_ddp_entry("kind", head + "        - {label: a, kind: ddp_speed, measured: [sec_per_iter, 1gpu]}\n"));
    CHECK_THAT(msg, Catch::Contains("ddp.yaml:10: [0].scenario.predict.numbers[0].kind"));
    CHECK_THAT(msg, Catch::Contains("\"ddp_speed\" is not one of"));
  }
  SECTION("weak scaling without its baseline") {
    const std::string msg = error_of(one_ddp_entry(
        "wbase", head + "        - {label: a, kind: e2e_weak_scaling, measured: [sec_per_iter, 8gpu]}\n"));
    CHECK_THAT(msg, Catch::Contains("numbers[0]: \"baseline\""));
    CHECK_THAT(msg, Catch::Contains("required for, and only for, ddp_strong_scaling and e2e_weak_scaling"));
  }
  SECTION("strong scaling without its 1-node baseline") {
    const std::string msg = error_of(one_ddp_entry(
        "base", head + "        - {label: a, kind: ddp_strong_scaling, measured: [sec_per_iter, 8gpu]}\n"));
    CHECK_THAT(msg, Catch::Contains("ddp.yaml:10: [0].scenario.predict.numbers[0]: \"baseline\""));
  }
  SECTION("unknown key") {
    const std::string msg = error_of(one_ddp_entry(
        "key", head + "        - {label: a, kind: ddp_step_time, measured: [sec_per_iter, 1gpu], sett: {}}\n"));
    CHECK_THAT(msg, Catch::Contains("numbers[0].sett: unknown key \"sett\""));
  }
  SECTION("a scenario file that does not exist") {
    const std::string msg =
        error_of(one_ddp_entry("file",
                               "    predict:\n      scenario: nowhere.yaml\n      numbers:\n"
                               "        - {label: a, kind: ddp_step_time, measured: [sec_per_iter, 1gpu]}\n"));
    CHECK_THAT(msg, Catch::Contains("ddp.yaml:8: [0].scenario.predict.scenario: scenario file"));
  }
  SECTION("a scenario on another topology than the entry's") {
    const std::string msg = error_of(
        one_ddp_entry("topo", head + "        - {label: a, kind: ddp_step_time, measured: [sec_per_iter, 1gpu],"
                                     " set: {cluster.topology: a100-8x-nvswitch}}\n"));
    CHECK_THAT(msg, Catch::Contains("runs on topology a100-8x-nvswitch, but the entry maps to v100-8x-nvlink-mesh"));
  }
  SECTION("an override the scenario refuses") {
    const std::string msg =
        error_of(one_ddp_entry("set", head + "        - {label: a, kind: ddp_step_time, measured: [sec_per_iter, 1gpu],"
                                             " set: {training.micro_batch: -3}}\n"));
    CHECK_THAT(msg, Catch::Contains("training.micro_batch"));
  }
}

TEST_CASE("validation/reference-errors.md is what the model predicts now") {
  const auto root = std::filesystem::path(DPSIM_SOURCE_DIR);
  std::ifstream in(root / "validation/reference-errors.md");
  std::stringstream committed;
  committed << in.rdbuf();
  const std::string now = reference_markdown(report(), dpsim::load_nccl(root / "data/nccl.yaml").version);
  INFO("regenerate: dpsim validate --reference validation/reference --markdown validation/reference-errors.md");
  CHECK(committed.str() == now);
  CHECK_THAT(now, Catch::Contains("| class | kind | n |"));
  CHECK_THAT(now, Catch::Contains("\\|error\\|"));  // a "|" inside a cell does not split it
}

TEST_CASE("reference set: a predicted number the entry does not publish is skipped with why") {
  const auto dir = one_ddp_entry("absent",
                                 "    predict:\n"
                                 "      scenario: " +
                                     kScenario +
                                     "\n"
                                     "      numbers:\n"
                                     "        - {label: gone, kind: ddp_step_time, measured: [sec_per_iter, 4gpu]}\n");
  const ReferenceReport r = score_reference(dir);
  CHECK(r.points.empty());
  REQUIRE(r.skipped.size() == 1);
  CHECK(r.skipped[0].reason == "gone: the number is not in the entry");
}

namespace {
// A reference folder holding one file of all-reduce entries (YAML text).
std::filesystem::path allreduce_entries(const std::string& name, const std::string& yaml) {
  const auto dir = std::filesystem::temp_directory_path() / ("dpsim-ref-entry-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "ar.yaml") << yaml;
  return dir;
}
// One all-reduce entry on 8 H100 with a log row; `scenario` (the text after "nodes: "), `row` and `kind` replace
// its defaults.
std::string allreduce_entry(const std::string& id, const std::string& scenario = "1, gpus_per_node: 8",
                            const std::string& row = "{size_bytes: 1048576, busbw_GBps: 60}",
                            const std::string& kind = "allreduce_busbw_curve") {
  return "- id: " + id + "\n  kind: " + kind + "\n  measured:\n    - " + row +
         "\n  scenario: {topology: h100-8x-nvswitch, nodes: " + scenario + "}\n";
}
}  // namespace

TEST_CASE("reference set: an entry's counts, sizes, numbers, kind and id are checked with file and line") {
  const auto error = [](const std::string& name, const std::string& yaml) {
    const auto dir = allreduce_entries(name, yaml);
    const std::string msg = error_of(dir);
    return msg.rfind(dir.string() + "/", 0) == 0 ? msg.substr(dir.string().size() + 1) : msg;  // without the folder
  };
  const std::string good = allreduce_entry("a", "1, gpus_per_node: 8");
  CHECK(error("good", good) == "(no error)");
  CHECK(error("nodes", allreduce_entry("a", "0, gpus_per_node: 8")) ==
        "ar.yaml:5: [0].scenario.nodes: must be a whole number >= 1, got 0");
  CHECK(error("gpus", allreduce_entry("a", "1, gpus_per_node: 64")) ==
        "ar.yaml:5: [0].scenario.gpus_per_node: 64 GPUs per node, but topology h100-8x-nvswitch has 8");
  CHECK(error("negative-size", allreduce_entry("a", "1, gpus_per_node: 8", "{size_bytes: -1, busbw_GBps: 60}")) ==
        "ar.yaml:4: [0].measured[0].size_bytes: must be a whole number of bytes from 1 to 2^50, got -1");
  CHECK(error("huge-size",
              allreduce_entry("a", "1, gpus_per_node: 8", "{size_bytes: 18446744073709551616, busbw_GBps: 60}")) ==
        "ar.yaml:4: [0].measured[0].size_bytes: must be a whole number of bytes from 1 to 2^50, got "
        "1.8446744073709552e+19");
  CHECK(error("nan", allreduce_entry("a", "1, gpus_per_node: 8", "{size_bytes: 1048576, busbw_GBps: .nan}")) ==
        "ar.yaml:4: [0].measured[0].busbw_GBps: \".nan\" is not a finite number");
  CHECK_THAT(
      error("kind", allreduce_entry("a", "1, gpus_per_node: 8", "{size_bytes: 1048576, busbw_GBps: 60}", "bogus")),
      Catch::StartsWith("ar.yaml:2: [0].kind: \"bogus\" is not one of: allreduce_busbw, "));
  CHECK(error("id", good + allreduce_entry("a", "1, gpus_per_node: 8")) ==
        "ar.yaml:6: [1].id: \"a\" is already the id of the entry at ar.yaml:1");
}

TEST_CASE("reference set: an entry without measured numbers, software or a scenario is skipped, not a crash") {
  const auto dir = allreduce_entries("sparse",
                                     "- id: a\n  kind: allreduce_busbw\n"
                                     "  scenario: {topology: h100-8x-nvswitch, nodes: 1, gpus_per_node: 8}\n"
                                     "- id: b\n  kind: ddp_step_time\n  measured: {}\n");
  const ReferenceReport r = score_reference(dir);
  REQUIRE(r.skipped.size() == 2);
  CHECK(r.skipped[0].reason == "no number in `measured` that dpsim predicts");
  CHECK(r.skipped[1].reason == "no scenario mapping");
}

TEST_CASE("a target no number was scored for is not judged, and says so") {
  ReferenceReport only_busbw;
  only_busbw.points.push_back(ReferencePoint{});
  only_busbw.points.back().kind = "allreduce_busbw_large";
  only_busbw.points.back().rel_error = 0.01;
  const auto t = check_targets(only_busbw);
  REQUIRE(t.size() == 8);  // the last two, memory: no training run predicted
  CHECK(t[0].points == 1);
  CHECK(t[0].met);
  for (size_t i = 2; i < t.size(); ++i) {
    CHECK(t[i].points == 0);
    CHECK_FALSE(t[i].met);
  }
  const std::string text = render_reference(only_busbw);
  CHECK(text.find("end-to-end throughput per GPU, median |error| (0 points): not judged") != std::string::npos);
  CHECK(text.find("MISSED") == std::string::npos);
}

TEST_CASE("reference set: a predict block with closed_form is estimated, the others simulated") {
  std::map<std::string, std::string> by;
  for (const auto& p : report().points) by[p.entry] = p.predicted_by;
  CHECK(by.at("narayanan21-t1-gpt1t-g3072") == "estimate");    // closed_form: 64 stages x 512 micro-batches
  CHECK(by.at("narayanan21-t1-gpt39.1b-g512") == "simulate");  // 2 stages x 12 micro-batches: simulated
  CHECK(by.at("narayanan21-t1-gpt1.7b-g32") == "simulate");
}

TEST_CASE("a published range reads with the source's digits: a log's printed 0.03 GB/s as 0.025-0.035 GB/s") {
  ReferenceReport r;
  ReferencePoint p;
  p.entry = "log";
  p.label = "1KiB";
  p.kind = "allreduce_busbw_small";
  p.unit = "GB/s";
  p.predicted = 0.04;
  p.published = 0.03;
  p.published_low = 0.03 - 0.005;  // 0.024999999999999998 in binary
  p.published_high = 0.03 + 0.005;
  r.points.push_back(p);
  p.label = "16GiB";
  p.published_low = 365;
  p.published_high = 370;
  r.points.push_back(p);
  const std::string text = render_reference(r);
  CHECK(text.find("0.025-0.035 GB/s") != std::string::npos);
  CHECK(text.find("365-370 GB/s") != std::string::npos);
  CHECK(text.find("0.0249999") == std::string::npos);
}

TEST_CASE("the 5x V100 Alpaca OOM is predicted through FSDP's unlimited gathers, which PyTorch 2.0 defaulted to") {
  const RunMemory* oom = nullptr;
  for (const RunMemory& m : report().memory)
    if (m.entry == "oom-alpaca-llama7b-5xv100-32gb-fsdp-fp16-bs1") oom = &m;
  REQUIRE(oom != nullptr);
  CHECK(oom->published_oom);
  CHECK_FALSE(oom->fits);
  // The same configuration with PyTorch 2.1's default (limit_all_gathers true) fits: the sharded model state and one
  // layer's activations are not what ran out.
  const std::vector<dpsim::Override> v100{{"cluster.topology", "v100-8x-nvlink-mesh"},
                                          {"cluster.gpus_per_node", "5"},
                                          {"training.param_dtype", "fp16"},
                                          {"training.grad_dtype", "fp16"},
                                          {"fsdp.limit_all_gathers", "true"}};
  const dpsim::Scenario limited = dpsim::load_scenario(
      std::filesystem::path(DPSIM_SOURCE_DIR) / "validation/reference/scenarios/memory/alpaca-llama-fsdp.yaml", v100);
  const dpsim::StepResult r = dpsim::estimate(limited, dpsim::make_step_plan(limited)).result;
  CHECK(r.fits);
  CHECK(r.memory_need_bytes() < oom->needed_bytes - 10e9);  // every layer's fp16 weights (14 GB) against two
}

TEST_CASE("a weak-scaling number is this run's per-GPU hardware FLOP/s over its baseline's, simulated") {
  const auto shipped = [](const std::string& name) {
    const dpsim::Scenario s =
        dpsim::load_scenario(std::filesystem::path(DPSIM_SOURCE_DIR) / "scenarios" / (name + ".yaml"));
    dpsim::SimOptions o;
    o.progress = false;
    return dpsim::simulate(s, dpsim::make_step_plan(s), o).hardware_flops_per_s_per_gpu;
  };
  const double ratio = 100.0 * shipped("megatron-8.3b-8xv100-tp8") / shipped("megatron-1.2b-1xv100");
  int found = 0;
  for (const auto& p : report().points)
    if (p.entry == "shoeybi19-fig5-weak-scaling-dgx2h-v100" && p.label == "8.3B, tensor 8, 8 GPUs") {
      ++found;
      CHECK(p.unit == "%");
      CHECK(p.published == 77);
      CHECK(p.predicted == Approx(ratio).epsilon(1e-9));  // the entry's overrides make the shipped 8-GPU scenario
    }
  CHECK(found == 1);
}
