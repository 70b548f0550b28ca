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

AlgorithmCost cost(CollectiveKind, double bytes, Protocol p, const FabricSummary& f, const NcclModel& nccl) {
  if (p != Protocol::simple) return {};
  const auto intra = nccl.hw_latency(Fabric::nvlink, Algorithm::nvlstree, f.arch);
  const double inter_hop = inter_hop_latency(Algorithm::nvlstree, p, f, nccl);
  if (!intra || intra->get(p) < 0 || inter_hop < 0) return {};
  const double latency = base_latency(nccl, Algorithm::nvlstree, p) + intra->get(p) +
                         edge_excess_latency(f, nccl, false) + 2.0 * log2_floor(f.nodes) * inter_hop;
  // The network side as algorithm bandwidth: the ring's bus bandwidth over its 2(n-1)/n bytes per byte, relieved as
  // the tree is on two nodes.
  const double net_algbw = inter_ring_busbw(f, nccl) * tree_network_relief(f) / ring_bytes_sent_per_gpu(1.0, f.world);
  // The fitted fill as it is: NVLSTree's heads are the node's NIC-attached GPUs of the NVLS graph, which dpsim does not
  // count (on 8-GPU nodes with 8 NICs they are the fitted call's 8).
  return nvls_call(latency, std::min(nvls_intra_algbw(f, nccl), net_algbw), bytes, nccl.nvls_fill);
}

// NCCL's NVLSTree steps: chunk = min(NCCL_NVLS_CHUNKSIZE, the tree's cap: 64 KiB from 4 nodes) (enqueue.cc:2281,
// transport/nvls.cc:227-229), smaller for small calls (:2282-2285). A step is one loop of all_reduce.h's NVLSTree
// kernel (RunWorkColl NCCL_ALGO_NVLS_TREE, :526-635): scatter to the switch, each head's reduce of its chunk sent up
// the inter-node tree, the tree's result received from above, multicast and gathered; the warps run at once
// (pipelined), so a step moves its chunk over the NVSwitch and every tree edge (nvls_flows / steps).
int steps(const FlowSpace& p, const StepCall& call, const NcclModel& nccl) {
  const NcclStepChunks& k = nccl.step_chunks;
  const double chunk =
      p.nodes() >= k.nvlstree_max_from_nodes ? std::min(k.nvls_bytes, k.nvlstree_max_bytes) : k.nvls_bytes;
  return nvls_steps(p, call, chunk, k.nvlstree_caps, nccl);
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
