// NCCL's tree all-reduce. Cost: NCCL src/graph/tuning.cc (tree latency: intra-node chain plus log2(nodes) network
// hops, each way; bandwidth with the per-size treeCorrectionFactor). Flows: inside a node a chain 0 -> 1 -> ... -> g-1
// (reduce up the chain, broadcast back down, pipelined: every chain edge carries S in each direction); across nodes
// NCCL's double binary tree, each tree carrying half the data, up (reduce) and down (broadcast) at once.
#include <cmath>

#include "terms.hpp"

namespace dpsim {

namespace {

using namespace algorithms;

bool runs(CollectiveKind kind) { return kind == CollectiveKind::all_reduce; }

// Single node: NCCL's tree degenerates to a chain; the ring or NVLS wins.
bool available(const FabricSummary& f, const NcclModel&) { return f.nodes >= 2; }

AlgorithmCost cost(CollectiveKind, double bytes, Protocol p, const FabricSummary& f, const NcclModel& nccl) {
  const auto intra = nccl.hw_latency(intra_fabric(f), Algorithm::tree, f.arch);
  const auto net = nccl.hw_latency(Fabric::net, Algorithm::tree, f.arch);
  if (!intra || !net || intra->get(p) < 0 || net->get(p) < 0) return {};
  const double intra_hop = intra->get(p) + edge_excess_latency(f, nccl, false);
  const double inter_hop = net->get(p) + nccl.net_plugin_latency(f.net_class) + edge_excess_latency(f, nccl, true);
  const double latency = base_latency(nccl, Algorithm::tree, p) +
                         2.0 * ((f.gpus_per_node - 1) * intra_hop + std::log2(f.nodes) * inter_hop);
  const double busbw = protocol_busbw(ring_busbw(f, nccl), p, f, nccl) * tree_correction(nccl, p, bytes);
  // A double binary tree moves the same 2(n-1)/n * S per GPU as the ring (reduce up, broadcast down, each
  // half of the data on each tree); NCCL's "algBw = busBw / 2" counts its busBw over both trees.
  return {true, latency, latency + ring_bytes_sent_per_gpu(bytes, f.world) / busbw, 0};
}

std::vector<Flow> flows(const FlowSpace& p, CollectiveKind) {
  std::vector<Flow> out;
  for (int v = 0; v < p.simulated_nodes(); ++v)
    for (int x = 0; x + 1 < p.gpus_per_node(); ++x) {
      out.push_back({p.gpu(v, x), p.gpu(v, x + 1), 1.0});
      out.push_back({p.gpu(v, x + 1), p.gpu(v, x), 1.0});
    }
  append_inter_node_double_tree(p, out);
  return out;
}

}  // namespace

const AlgorithmDescriptor& tree_algorithm() {
  static const AlgorithmDescriptor d{Algorithm::tree,
                                     "tree",
                                     "Tree",
                                     "NCCL's double binary tree across nodes (a chain inside each): latency "
                                     "logarithmic in the node count, all-reduce only",
                                     runs,
                                     available,
                                     cost,
                                     flows,
                                     one_round,
                                     flows};
  return d;
}

}  // namespace dpsim
