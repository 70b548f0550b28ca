// NVLS (NVLink SHARP) all-reduce on an NVSwitch that reduces in the switch: every GPU sends its S
// bytes to the switch and receives the reduced S back, at once. Across nodes (NVLS tree) the node's
// result also crosses the inter-node double binary tree.
#include "collective.hpp"

namespace dpsim::sim {

namespace {

class Nvls final : public CollectiveAlgorithm {
 public:
  Algorithm algorithm() const override { return Algorithm::nvls; }
  bool available(const Platform& p) const override { return p.nvls_capable(); }
  std::vector<Flow> flows(const Platform& p, CollectiveKind, double bytes) const override {
    std::vector<Flow> out;
    for (int v = 0; v < p.simulated_nodes(); ++v)
      for (int x = 0; x < p.gpus_per_node(); ++x) {
        out.push_back({p.gpu(v, x), p.nvswitch(v), bytes});
        out.push_back({p.nvswitch(v), p.gpu(v, x), bytes});
      }
    append_inter_node_double_tree(p, bytes, out);
    return out;
  }
};

}  // namespace

std::unique_ptr<CollectiveAlgorithm> make_nvls() { return std::make_unique<Nvls>(); }

}  // namespace dpsim::sim
