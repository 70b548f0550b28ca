// NCCL tree all-reduce: inside a node a chain 0 -> 1 -> ... -> g-1 (reduce up the chain, broadcast
// back down, pipelined: every chain edge carries S in each direction); across nodes NCCL's double
// binary tree, each tree carrying half the data, up (reduce) and down (broadcast) at once.
#include "collective.hpp"

namespace dpsim::sim {

namespace {

// Binary tree over 0..n-1 in heap order; the second tree mirrors the ranks (NCCL's ncclGetDtree uses
// a mirrored or shifted copy so that most nodes are interior in only one tree).
int parent(int v, int n, int tree) {
  if (tree == 0) return v == 0 ? -1 : (v - 1) / 2;
  const int u = n - 1 - v;
  return u == 0 ? -1 : n - 1 - (u - 1) / 2;
}

}  // namespace

void append_inter_node_double_tree(const Platform& p, double bytes, std::vector<Flow>& out) {
  const int n = p.nodes();
  if (n < 2) return;
  const double half = bytes / 2 * p.channel_share();
  for (int tree = 0; tree < 2; ++tree)
    for (int v = 0; v < n; ++v) {
      const int u = parent(v, n, tree);
      if (u < 0) continue;
      for (int c = 0; c < p.channels(); ++c) {
        out.push_back({p.channel(v, c), p.channel(u, c), half});  // reduce
        out.push_back({p.channel(u, c), p.channel(v, c), half});  // broadcast
      }
    }
}

namespace {

class Tree final : public CollectiveAlgorithm {
 public:
  Algorithm algorithm() const override { return Algorithm::tree; }
  bool available(const Platform&) const override { return true; }
  std::vector<Flow> flows(const Platform& p, CollectiveKind, double bytes) const override {
    std::vector<Flow> out;
    for (int v = 0; v < p.simulated_nodes(); ++v)
      for (int x = 0; x + 1 < p.gpus_per_node(); ++x) {
        out.push_back({p.gpu(v, x), p.gpu(v, x + 1), bytes});
        out.push_back({p.gpu(v, x + 1), p.gpu(v, x), bytes});
      }
    append_inter_node_double_tree(p, bytes, out);
    return out;
  }
};

}  // namespace

std::unique_ptr<CollectiveAlgorithm> make_tree() { return std::make_unique<Tree>(); }

}  // namespace dpsim::sim
