// NCCL's ring: for an all-reduce each rank sends 2(n-1)/n * S to its ring successor, for a reduce-scatter or an
// all-gather (n-1)/n * S.
// Intra-node: the node's ring edges (platform.intra_ring_edges()); with several NICs NCCL runs one
// channel per NIC and each channel's ring leaves the node through its own NIC (rail-aligned: NIC c
// of node v to NIC c of node v+1), so channel c carries 1/nics of the data between nodes.
#include "collective.hpp"

namespace dpsim::sim {

namespace {

void ring_flows(const Platform& p, double per_rank_bytes, std::vector<Flow>& out) {
  for (int v = 0; v < p.simulated_nodes(); ++v)
    for (const Platform::Edge& e : p.intra_ring_edges())
      out.push_back({p.gpu(v, e.from), p.gpu(v, e.to), per_rank_bytes * e.share});
  if (p.nodes() > 1)
    for (int v = 0; v < p.nodes(); ++v)
      for (int c = 0; c < p.channels(); ++c)
        out.push_back({p.channel(v, c), p.channel((v + 1) % p.nodes(), c), per_rank_bytes * p.channel_share()});
}

class Ring final : public CollectiveAlgorithm {
 public:
  Algorithm algorithm() const override { return Algorithm::ring; }
  bool available(const Platform&) const override { return true; }
  bool runs(CollectiveKind kind) const override {
    return kind == CollectiveKind::all_reduce || kind == CollectiveKind::reduce_scatter ||
           kind == CollectiveKind::all_gather;
  }
  std::vector<Flow> flows(const Platform& p, CollectiveKind kind, double bytes) const override {
    std::vector<Flow> out;
    ring_flows(p, bytes_moved_per_rank(kind, p.world(), bytes), out);
    return out;
  }
  // All-reduce: n-1 reduce-scatter steps then n-1 all-gather steps; reduce-scatter or all-gather alone: n-1.
  int steps(const Platform& p, CollectiveKind kind) const override {
    return (kind == CollectiveKind::all_reduce ? 2 : 1) * (p.world() - 1);
  }
  std::vector<Flow> step_flows(const Platform& p, CollectiveKind, double bytes) const override {
    std::vector<Flow> out;
    ring_flows(p, bytes / p.world(), out);  // one chunk of S/n per rank per step
    return out;
  }
};

}  // namespace

std::unique_ptr<CollectiveAlgorithm> make_ring() { return std::make_unique<Ring>(); }

}  // namespace dpsim::sim
