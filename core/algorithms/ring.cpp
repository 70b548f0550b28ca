// NCCL's ring: for an all-reduce each rank sends 2(n-1)/n * S to its ring successor, for a reduce-scatter or an
// all-gather (n-1)/n * S. Cost: NCCL src/graph/tuning.cc (ncclTopoTuneModel): all-reduce runs 2(n-1) steps of which
// 2(nodes-1) cross the network; reduce-scatter and all-gather run n-1, of which nodes-1 cross it.
// Flows: inside a node the node's ring edges (FlowSpace::intra_ring_edges); with several NICs NCCL runs one channel
// per NIC and each channel's ring leaves the node through its own NIC (rail-aligned: NIC c of node v to NIC c of
// node v+1), so channel c carries 1/nics of the data between nodes.
#include <algorithm>

#include "terms.hpp"

namespace dpsim {

namespace {

using namespace algorithms;

bool runs(CollectiveKind kind) {
  return kind == CollectiveKind::all_reduce || kind == CollectiveKind::reduce_scatter ||
         kind == CollectiveKind::all_gather;
}

std::string unavailable(const FabricSummary&, const NcclModel&) { return {}; }

AlgorithmCost cost(CollectiveKind kind, double bytes, Protocol p, const FabricSummary& f, const NcclModel& nccl) {
  const auto intra = nccl.hw_latency(intra_fabric(f), Algorithm::ring, f.arch);
  const double inter_lat = f.nodes > 1 ? inter_hop_latency(Algorithm::ring, p, f, nccl) : 0.0;
  if (!intra || intra->get(p) < 0 || inter_lat < 0) return {};
  const int n = f.world;
  const int passes = kind == CollectiveKind::all_reduce ? 2 : 1;  // reduce-scatter then all-gather, or one of them
  const int steps = passes * (n - 1);
  const int inter_steps = f.nodes > 1 ? passes * (f.nodes - 1) : 0;
  double intra_lat = intra->get(p);
  if (f.nodes > 1)
    intra_lat = std::max(
        intra_lat, nccl.net_overhead(f.cpu_vendor) * (p == Protocol::simple ? nccl.net_overhead_simple_factor : 1.0));
  intra_lat += edge_excess_latency(f, nccl, false);  // slower edges than NCCL's table holds (hypothetical fabrics)
  double latency = base_latency(nccl, Algorithm::ring, p) + (steps - inter_steps) * intra_lat + inter_steps * inter_lat;
  // NCCL's "plateau effect of ring": multi-node all-reduce with Simple only (data/nccl.yaml)
  if (f.nodes > 1 && p == Protocol::simple && kind == CollectiveKind::all_reduce)
    latency *= nccl.ring_plateau_factor(f.arch);
  const double sent = bytes_moved_per_rank(kind, n, bytes);
  const double busbw = protocol_busbw(ring_busbw(f, nccl), p, f, nccl);
  const double bw_s = sent / busbw;
  // A small LL call runs on fewer channels and threads than NCCL's model (which chooses by it) assumes.
  const double call_bw_s = p == Protocol::ll ? sent / ll_call_busbw(busbw, bytes, f, nccl) : bw_s;
  // The pipeline fill is GPU-side (NCCL's smaller chunks and fewer channels for smaller messages); LL moves
  // 8-byte lines with flags and has none. It runs beside the transfer, at the GPUs' own links: when the network or
  // the host-memory staging of NCCL's SHM transport, not those links, is the bottleneck, the slower stage hides it
  // (3 A100 nodes x 4 HDR reach 96 GB/s already at 128 MB, nccl-tests#119; through host memory, 2x RTX 2080 Ti and
  // 4x RTX 5090 at 1-16 MiB come within 1% and 4-8% of their published curves with it hidden, -3% and -11..-13% with
  // it paid), so only what exceeds the bottleneck's transfer time is paid.
  double fill = 0;
  if (p != Protocol::ll) {
    const double gpu_side_s =
        sent / protocol_busbw(intra_link_busbw(f, nccl), p, f, nccl) + nccl.ring_fill.seconds(bytes);
    fill = std::max(0.0, gpu_side_s - bw_s);
  }
  return {true, latency, latency + fill + call_bw_s, fill, latency + fill + bw_s};
}

void ring_flows(const FlowSpace& p, double per_rank_bytes, std::vector<Flow>& out) {
  for (int v = 0; v < p.simulated_nodes(); ++v)
    for (const FlowSpace::Edge& e : p.intra_ring_edges())
      out.push_back({p.gpu(v, e.from), p.gpu(v, e.to), per_rank_bytes * e.share});
  if (p.nodes() > 1)
    for (int v = 0; v < p.nodes(); ++v)
      for (int c = 0; c < p.channels(); ++c)
        out.push_back({p.channel(v, c), p.channel((v + 1) % p.nodes(), c), per_rank_bytes * p.channel_share()});
}

std::vector<Flow> flows(const FlowSpace& p, CollectiveKind kind) {
  std::vector<Flow> out;
  ring_flows(p, bytes_moved_per_rank(kind, p.world(), 1.0), out);
  return out;
}

// All-reduce: n-1 reduce-scatter steps then n-1 all-gather steps; reduce-scatter or all-gather alone: n-1
// (NCCL src/device/all_reduce.h:14-83 runRing: one send, n-2 recv-reduce-send, one recv-reduce-copy-send, n-2
// recv-copy-send; enqueue.cc:2343-2350 ncclPatternRingTwice nstepsPerLoop 2(n-1), ncclPatternRing n-1). Each moves a
// chunk of S/n per rank: flows() / steps.
int steps(const FlowSpace& p, const StepCall& call, const NcclModel&) {
  return std::max(1, (call.kind == CollectiveKind::all_reduce ? 2 : 1) * (p.world() - 1));
}

}  // namespace

const AlgorithmDescriptor& ring_algorithm() {
  static const AlgorithmDescriptor d{Algorithm::ring,
                                     "ring",
                                     "Ring",
                                     "NCCL's ring: every rank sends to its successor, bandwidth-optimal, latency "
                                     "linear in the rank count",
                                     runs,
                                     unavailable,
                                     cost,
                                     flows,
                                     steps};
  return d;
}

}  // namespace dpsim
