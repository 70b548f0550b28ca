// NCCL's NVLSTree all-reduce (2.18+): NVLink SHARP reduces and broadcasts inside each node's NVSwitch, NCCL's double
// binary tree joins the nodes. Cost: NCCL src/graph/tuning.cc ncclTopoTuneModel: latency intraLat + 2 log2i(nNodes)
// interLat (hwLat NVLSTree rows, :428); bandwidth the smaller of the NVLS side and the network side, the network's
// doubled on two nodes (:320, "Handle 2 node case of NVLSTree": each node sends S once where the ring sends
// 2(n-1)/n S). NCCL disables it on one node (:501). Flows: NVLS's (GPU -> NVSwitch -> GPU) plus the inter-node tree.
#include <algorithm>

#include "terms.hpp"

namespace dpsim {

namespace {

using namespace algorithms;

bool runs(CollectiveKind kind) { return kind == CollectiveKind::all_reduce; }

std::string unavailable(const FabricSummary& f, const NcclModel& nccl) {
  if (f.nodes < 2) return "NCCL disables NVLSTree on a single node (tuning.cc: \"Disable NVLS Tree on a single node\")";
  return nvls_domain_unavailable(f, nccl);
}

// The chunk pipeline's fill, which neither NCCL's latency term nor its bandwidth term holds (as the tree's, tree.cpp):
// NCCL runs channels x heads pipelines at once (a loop moves one chunk per head on each channel, enqueue.cc:2276-2285),
// each at that share of a side's algbw. A chunk crosses the NVSwitch on its way in (the GPUs' scatter, the head's
// reduce), each tree level up (the heads' reduce warps send it on, all_reduce.h RunWorkColl NCCL_ALGO_NVLS_TREE), each
// level back down (the bcast warps) and the switch again (multicast, gather): 2 NVLS hops and 2 log2(nodes) network
// hops, each taking a chunk at its side's rate (Simple hands a chunk on when it has arrived). The first chunk takes
// the sum of the hops, each later one the slowest hop, which S / algbw counts: the fill is the sum less the slowest.
// The chunk is NCCL's for the call (nvlstree_chunk_bytes), at most a pipeline's share of the call.
double pipeline_fill(double bytes, double nvls_algbw, double net_algbw, const FabricSummary& f, const NcclModel& nccl) {
  const NcclStepChunks& k = nccl.step_chunks;
  const int channels = k.nvls_channels_for(f.arch, true);
  const int heads = nvlstree_heads(f, nccl.nvls_fill.max_heads);
  const double pipelines = static_cast<double>(channels) * heads;
  const double chunk = std::min(bytes / pipelines, nvlstree_chunk_bytes(bytes / channels, f.nodes, heads, k));
  if (!(chunk > 0) || !(nvls_algbw > 0) || !(net_algbw > 0)) return 0;
  const double nvls_hop = chunk * pipelines / nvls_algbw, net_hop = chunk * pipelines / net_algbw;
  const int levels = log2_floor(f.nodes);
  return 2 * nvls_hop + 2 * levels * net_hop - std::max(nvls_hop, net_hop);
}

// The NVLS side as algorithm bandwidth over all the ranks: NCCL's tuning gives NVLSTree the bus bandwidth NVLS reaches
// inside one node (tuning.cc:310-323, intraBw = bwIntra x nvlsEfficiency x 2 for an all-reduce, whatever the node
// count) and turns it into algorithm bandwidth over all of them (:376-379, nRanks / nsteps = n / 2(n-1)). So a call
// across nodes keeps the bus bandwidth of one node's NVLS, where one node's algorithm bandwidth would give 2(n-1)/n
// over 2(g-1)/g times it (+7% on 2 nodes of 8). Measured two-node H100 runs sit at one node's bus bandwidth
// (validation/reference: 466-477 GB/s on 2 x 8 H100 over 8 x 400G, against 476-480 on one node).
double nvlstree_nvls_algbw(const FabricSummary& f, const NcclModel& nccl) {
  return nvls_intra_algbw(f, nccl) * ring_bytes_sent_per_gpu(1.0, f.gpus_per_node) /
         ring_bytes_sent_per_gpu(1.0, f.world);
}

AlgorithmCost cost(CollectiveKind, double bytes, Protocol p, const FabricSummary& f, const NcclModel& nccl) {
  if (p != Protocol::simple) return {};
  const auto intra = nccl.hw_latency(Fabric::nvlink, Algorithm::nvlstree, f.arch);
  const double inter_hop = inter_hop_latency(Algorithm::nvlstree, p, f, nccl);
  if (!intra || intra->get(p) < 0 || inter_hop < 0) return {};
  const double latency = base_latency(nccl, Algorithm::nvlstree, p) + intra->get(p) +
                         edge_excess_latency(f, nccl, false) + 2.0 * log2_floor(f.nodes) * inter_hop;
  // The network side as algorithm bandwidth: the ring's bus bandwidth over its 2(n-1)/n bytes per byte, relieved as
  // NCCL's double tree relieves it (on 2 and 3 nodes). NCCL's own model relieves it on 2 nodes only (:320).
  const double ring_net_algbw = inter_ring_busbw(f, nccl) / ring_bytes_sent_per_gpu(1.0, f.world);
  const double net_algbw = ring_net_algbw * tree_network_relief(f);
  // NCCL's treeCorrectionFactor on Blackwell with an x86 host (tuning.cc:643-645, from 2.29), applied to the call as
  // to NCCL's choice, as the tree's (terms.cpp tree_busbw)
  const double corrected = nvlstree_corrected(f, nccl) ? tree_correction(nccl, Algorithm::nvlstree, p, bytes) : 1.0;
  const double nvls_algbw = nvlstree_nvls_algbw(f, nccl);
  const double algbw = std::min(nvls_algbw, net_algbw) * corrected;
  const double tuner_algbw = std::min(nvls_algbw, f.nodes <= 2 ? net_algbw : ring_net_algbw) * corrected;
  const double fill = pipeline_fill(bytes, nvls_algbw, net_algbw, f, nccl);
  // NCCL chooses by latency + S / bandwidth, which has no fill (tuning.cc ncclTopoGetAlgoTime)
  return {true, latency, latency + fill + bytes / algbw, fill, latency + bytes / tuner_algbw};
}

// NCCL's NVLSTree steps: its chunk for the call (nvlstree_chunk_bytes) per head and channel. A step is one loop of
// all_reduce.h's NVLSTree kernel (RunWorkColl NCCL_ALGO_NVLS_TREE, :526-635): scatter to the switch, each head's
// reduce of its chunk sent up the inter-node tree, the tree's result received from above, multicast and gathered; the
// warps run at once (pipelined), so a step moves its chunk over the NVSwitch and every tree edge (nvls_flows / steps).
// The steps count every GPU as a head (the simulated space does not say which GPUs have a NIC); the cost's fill counts
// NCCL's heads (nvlstree_heads), the same on nodes with a NIC per GPU.
int steps(const FlowSpace& p, const StepCall& call, const NcclModel& nccl) {
  const NcclStepChunks& k = nccl.step_chunks;
  const int heads = p.gpus_per_node();
  const double channel_bytes = call.bytes / k.nvls_channels_for(call.arch, p.nodes() > 1);
  const double chunk = nvlstree_chunk_bytes(channel_bytes, p.nodes(), heads, k);
  return chunk > 0 ? steps_of_chunks(channel_bytes, heads * chunk) : 1;
}

}  // namespace

const AlgorithmDescriptor& nvlstree_algorithm() {
  static const AlgorithmDescriptor d{Algorithm::nvlstree,
                                     "nvlstree",
                                     "NVLSTree",
                                     "NVLink SHARP inside each NVSwitch node, NCCL's double binary tree across nodes; "
                                     "2 or more nodes, all-reduce only",
                                     runs,
                                     unavailable,
                                     cost,
                                     nvls_flows,
                                     steps};
  return d;
}

}  // namespace dpsim
