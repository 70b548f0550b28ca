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

// The chunk pipeline's fill, which neither NCCL's latency term (each hop's latency) nor its bandwidth term (the
// steady state) holds: a call's last chunk leaves the last GPU (hops - 1) chunk times after its first chunk would
// have, each chunk crossing the node's chain and the tree's levels up (the reduce) and back down (the broadcast),
// 2 (ppn - 1 + log2 nodes) hops, one chunk time each: the chunk NCCL cuts for this call (tree_chunk_bytes) over one
// channel's share of the call's rate (one channel per NIC; algbw = busbw / 2). LL128 and Simple, which hand a chunk
// on when it has arrived; LL forwards its 8-byte lines as their flags arrive, as on the ring (ring.cpp).
double pipeline_fill(double bytes, Protocol p, double wire_busbw, const FabricSummary& f, const NcclModel& nccl) {
  if (p == Protocol::ll || wire_busbw <= 0) return 0;
  const int hops = 2 * (f.gpus_per_node - 1 + log2_floor(f.nodes));
  const double channels = std::max(1, f.nics_per_node);
  const double chunk =
      std::min(bytes / channels, tree_chunk_bytes(bytes / channels, p, f.nodes, f.gpus_per_node, nccl.step_chunks));
  return std::max(0, hops - 1) * chunk / (wire_busbw / 2 / channels);
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
  const double wire = tree_busbw(p, bytes, f, nccl, TreeView::wire);
  const double fill = pipeline_fill(bytes, p, wire, f, nccl);
  return {true, latency, latency + fill + sent / wire, fill,
          latency + sent / tree_busbw(p, bytes, f, nccl, TreeView::nccl_tuner)};
}

std::vector<Flow> flows(const FlowSpace& p, CollectiveKind) {
  std::vector<Flow> out;
  append_intra_node_chain(p, out);
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
  const double channel_bytes = call.bytes * p.channel_share();
  return steps_of_chunks(
      channel_bytes, tree_chunk_bytes(channel_bytes, call.protocol, p.nodes(), p.gpus_per_node(), nccl.step_chunks));
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
