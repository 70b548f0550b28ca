// NCCL's CollNetChain all-reduce: the network's switches reduce (InfiniBand SHARP through NCCL's CollNet plugin
// interface), each node a chain of its GPUs that reduces up to the GPU facing the network and broadcasts the
// switches' result back down. Cost: NCCL src/graph/tuning.cc ncclTopoTuneModel (2.30.7): latency
// 2 (ppn - 1) intraLat + interLat (:420-421; hwLat CollNetChain rows, baseLat 0), the network step paying the
// plugin's latency twice for Simple, the only protocol CollNet runs (:344-345); bandwidth: NCCL prices it by the
// node's own graph (bw = bwIntra for CollNet, :303; algBw = busBw / 2, :378-381): the chain, where each GPU sends S
// up and S down. The wire adds the network side: each node sends S to the switches and receives the reduced S, at
// its NICs' rate. Enabled only with NCCL_COLLNET_ENABLE=1 (:504-506) on a SHARP fabric; NCCL's own choice weighs it
// only then (scenario collective.collnet), and a scenario may name it. No pipeline fill: the one published CollNet
// sweep (coreweave/nccl-tests, 8 H100 nodes) starts at 512 MiB.
// Flows: the chain inside each node (both directions, S each) and each node's S out and S in over its NICs, laid
// as to the next node: the switches' reduction has no flow of its own in dpsim, but each NIC carries what it does.
#include <algorithm>

#include "terms.hpp"

namespace dpsim {

namespace {

using namespace algorithms;

bool runs(CollectiveKind kind) { return kind == CollectiveKind::all_reduce; }

std::string unavailable(const FabricSummary& f, const NcclModel&) {
  if (f.nodes < 2) return "CollNet reduces in the network's switches between nodes; NCCL does not run it on one node";
  if (!f.sharp)
    return "the topology's network does not reduce in its switches (network.sharp: true, InfiniBand SHARP, which "
           "NCCL reaches through its CollNet plugin)";
  return {};
}

AlgorithmCost cost(CollectiveKind, double bytes, Protocol p, const FabricSummary& f, const NcclModel& nccl) {
  if (p != Protocol::simple) return {};
  const auto intra = nccl.hw_latency(intra_fabric(f), Algorithm::collnet_chain, f.arch);
  const double inter_hop = inter_hop_latency(Algorithm::collnet_chain, p, f, nccl);
  if (!intra || intra->get(p) < 0 || inter_hop < 0) return {};
  const double latency = base_latency(nccl, Algorithm::collnet_chain, p) +
                         2.0 * (f.gpus_per_node - 1) * (intra->get(p) + edge_excess_latency(f, nccl, false)) +
                         inter_hop;
  // The chain: every GPU sends its partial sum up and the result down, 2 S, at the ring's per-GPU rate.
  const double chain_algbw = f.gpus_per_node > 1 ? intra_ring_busbw(f, nccl) / 2 : 0.0;
  const double net_algbw = inter_ring_busbw(f, nccl);  // S out and S in per node
  const double wire_algbw = chain_algbw > 0 ? std::min(chain_algbw, net_algbw) : net_algbw;
  const double tuner_algbw = chain_algbw > 0 ? chain_algbw : net_algbw;
  return {true, latency, latency + bytes / wire_algbw, 0, latency + bytes / tuner_algbw};
}

std::vector<Flow> flows(const FlowSpace& p, CollectiveKind) {
  std::vector<Flow> out;
  append_intra_node_chain(p, out);
  for (int v = 0; v < p.nodes(); ++v)
    for (int c = 0; c < p.channels(); ++c)
      out.push_back({p.channel(v, c), p.channel((v + 1) % p.nodes(), c), p.channel_share()});
  return out;
}

// NCCL's CollNetChain steps (enqueue.cc:2244-2253, data/nccl.yaml step_chunks.collnet_chain): a channel's bytes in
// chunks of at most 256 KiB, halved for small calls by the chain's depth (the node's GPUs).
int steps(const FlowSpace& p, const StepCall& call, const NcclModel& nccl) {
  const NcclStepChunks& k = nccl.step_chunks;
  const double channel_bytes = call.bytes * p.channel_share();
  return steps_of_chunks(
      channel_bytes, halved_chunk(k.collnet_chain_bytes, channel_bytes, p.gpus_per_node(), k.collnet_chain_halving));
}

}  // namespace

const AlgorithmDescriptor& collnet_chain_algorithm() {
  static const AlgorithmDescriptor d{Algorithm::collnet_chain,
                                     "collnet_chain",
                                     "CollnetChain",
                                     "NCCL's CollNetChain: the network's switches reduce (InfiniBand SHARP), a chain "
                                     "of GPUs inside each node; 2 or more nodes on a SHARP fabric, all-reduce only",
                                     runs,
                                     unavailable,
                                     cost,
                                     flows,
                                     steps,
                                     true};
  return d;
}

}  // namespace dpsim
