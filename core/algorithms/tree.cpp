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

// Single node: NCCL's tree degenerates to a chain of the node's GPUs, which NCCL's model never prefers to the ring
// there (its LL128 factor is 7/9 on one node, tuning.cc:335); dpsim does not offer it.
std::string unavailable(const FabricSummary& f, const NcclModel&) {
  return f.nodes >= 2 ? std::string()
                      : "NCCL's tree spans nodes; on one node it is a chain of the node's GPUs that the ring (or NVLS) "
                        "always beats, so dpsim runs it across 2 or more nodes only";
}

AlgorithmCost cost(CollectiveKind, double bytes, Protocol p, const FabricSummary& f, const NcclModel& nccl) {
  const auto intra = nccl.hw_latency(intra_fabric(f), Algorithm::tree, f.arch);
  const double inter_hop = inter_hop_latency(Algorithm::tree, p, f, nccl);
  if (!intra || intra->get(p) < 0 || inter_hop < 0) return {};
  const double intra_hop = intra->get(p) + edge_excess_latency(f, nccl, false);
  // tuning.cc:416: 2 * ((nRanks / nNodes - 1) * intraLat + log2i(nNodes) * interLat)
  const double latency = base_latency(nccl, Algorithm::tree, p) +
                         2.0 * ((f.gpus_per_node - 1) * intra_hop + log2_floor(f.nodes) * inter_hop);
  // busbw as nccl-tests reports it: 2(n-1)/n * S over the time. NCCL chooses by its own model's bandwidth; the call
  // runs at the wire's (terms.cpp tree_busbw).
  const double sent = ring_bytes_sent_per_gpu(bytes, f.world);
  return {true, latency, latency + sent / tree_busbw(p, bytes, f, nccl, TreeView::wire), 0,
          latency + sent / tree_busbw(p, bytes, f, nccl, TreeView::nccl_tuner)};
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

// NCCL's tree steps on one channel (dpsim lays one per NIC): its bytes in chunks of the protocol's step
// (enqueue.cc:2222-2227), the LL128 chunk halved for small calls (:2286-2294); ncclPatternTreeUpDown runs one chunk
// per step (:2325-2329). src/device/all_reduce.h runTreeSplit (:146-226): each chunk is reduced up the tree (leaves
// send, the others receive from their children, reduce and send to their parent) while the previous chunks are
// broadcast down (split warps, so both directions run at once; the root reduces and sends down in one pass).
// The pipeline's fill is NCCL's latency term, one hop latency per level (tuning.cc:416); a step moves one chunk over
// every chain and tree edge in both directions (flows / steps).
int steps(const FlowSpace& p, const StepCall& call, const NcclModel& nccl) {
  const NcclStepChunks& k = nccl.step_chunks;
  double chunk = k.tree_bytes.get(call.protocol);
  const double channel_bytes = call.bytes * p.channel_share();
  if (call.protocol == Protocol::ll128 && chunk > 0) {
    const double ppn = p.gpus_per_node();
    const double nsteps = 1 + log2_floor(p.nodes()) + k.tree_ll128_steps_per_gpu * ppn;
    for (const NcclStepChunks::Halving& h : k.tree_ll128_halving)
      while (std::floor(channel_bytes / chunk) < nsteps * h.steps / ppn && chunk > h.above_bytes) chunk /= 2;
  }
  return steps_of_chunks(channel_bytes, chunk);
}

}  // namespace

const AlgorithmDescriptor& tree_algorithm() {
  static const AlgorithmDescriptor d{Algorithm::tree,
                                     "tree",
                                     "Tree",
                                     "NCCL's double binary tree across nodes (a chain inside each): latency "
                                     "logarithmic in the node count, all-reduce only",
                                     runs,
                                     unavailable,
                                     cost,
                                     flows,
                                     steps};
  return d;
}

}  // namespace dpsim
