// NVLS (NVLink SHARP) all-reduce on an NVSwitch that reduces in the switch: every GPU sends its S bytes to the switch
// and receives the reduced S back, at once; algorithm bandwidth flat in the GPU count (data/nccl.yaml
// nvls_algbw_per_link, with its source). Flows across nodes (NVLS tree) also cross the inter-node double binary tree;
// the cost model runs NVLS on one node only (nccl.nvls_min_gpus GPUs or more, the topology's intra_node.nvls).
#include "terms.hpp"

namespace dpsim {

namespace {

using namespace algorithms;

bool runs(CollectiveKind kind) { return kind == CollectiveKind::all_reduce; }

bool available(const FabricSummary& f, const NcclModel& nccl) {
  return f.nvls && f.nodes == 1 && f.gpus_per_node >= nccl.nvls_min_gpus;
}

AlgorithmCost cost(CollectiveKind, double bytes, Protocol p, const FabricSummary& f, const NcclModel& nccl) {
  if (p != Protocol::simple) return {};
  const auto lat = nccl.hw_latency(Fabric::nvlink, Algorithm::nvls, f.arch);
  if (!lat || lat->get(p) < 0) return {};
  const double algbw = f.intra_ring_bytes_per_s * nccl.nvls_algbw_per_link;  // flat in the GPU count
  const double latency = lat->get(p) + edge_excess_latency(f, nccl, false);  // one pass GPU -> switch -> GPU
  const double fill = nccl.nvls_fill.seconds(bytes);
  return {true, latency, latency + fill + bytes / algbw, fill};
}

std::vector<Flow> flows(const FlowSpace& p, CollectiveKind) {
  std::vector<Flow> out;
  for (int v = 0; v < p.simulated_nodes(); ++v)
    for (int x = 0; x < p.gpus_per_node(); ++x) {
      out.push_back({p.gpu(v, x), p.nvswitch(v), 1.0});
      out.push_back({p.nvswitch(v), p.gpu(v, x), 1.0});
    }
  append_inter_node_double_tree(p, out);
  return out;
}

}  // namespace

const AlgorithmDescriptor& nvls_algorithm() {
  static const AlgorithmDescriptor d{Algorithm::nvls,
                                     "nvls",
                                     "NVLS",
                                     "NVLink SHARP: the NVSwitch reduces, each GPU sends and receives S once; one "
                                     "NVSwitch node, all-reduce only",
                                     runs,
                                     available,
                                     cost,
                                     flows,
                                     one_round,
                                     flows};
  return d;
}

}  // namespace dpsim
