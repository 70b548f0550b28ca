#pragma once
// One all-reduce algorithm per file behind this interface; a registry maps Algorithm -> instance.
// An algorithm says which flows move one all-reduce of `bytes` payload over the platform. The driver
// (step.cpp) adds NCCL's latency, multiplies bytes by 1/protocol efficiency (wire bytes) and hands
// the flows to SimGrid.
#include <memory>
#include <vector>

#include "dpsim/collective_kind.hpp"
#include "dpsim/scenario.hpp"
#include "platform.hpp"

namespace dpsim::sim {

struct Flow {
  int src = 0;  // platform host indices
  int dst = 0;
  double bytes = 0;
};

class CollectiveAlgorithm {
 public:
  virtual ~CollectiveAlgorithm() = default;
  virtual Algorithm algorithm() const = 0;
  virtual bool available(const Platform& platform) const = 0;
  // The collective kinds it runs (the core cost model picks only those: dpsim::collective_cost).
  virtual bool runs(CollectiveKind kind) const { return kind == CollectiveKind::all_reduce; }
  // Fast fidelity: every flow of the whole collective at once (bucket granularity).
  virtual std::vector<Flow> flows(const Platform& platform, CollectiveKind kind, double bytes) const = 0;
  // Step fidelity: the collective as `steps()` synchronized rounds of `step_flows()` each.
  // Algorithms without a per-step form run one round of flows().
  virtual int steps(const Platform& platform, CollectiveKind kind) const {
    (void)platform;
    (void)kind;
    return 1;
  }
  virtual std::vector<Flow> step_flows(const Platform& platform, CollectiveKind kind, double bytes) const {
    return flows(platform, kind, bytes);
  }
};

const CollectiveAlgorithm& collective_algorithm(Algorithm algorithm);  // throws for Algorithm::automatic

// Registration, one per algorithm file.
std::unique_ptr<CollectiveAlgorithm> make_ring();
std::unique_ptr<CollectiveAlgorithm> make_tree();
std::unique_ptr<CollectiveAlgorithm> make_nvls();

// Shared by tree and NVLS: flows of NCCL's double binary tree across nodes (each tree moves half the
// data up for the reduce and down for the broadcast, pipelined, so both directions run at once).
void append_inter_node_double_tree(const Platform& platform, double bytes, std::vector<Flow>& out);

}  // namespace dpsim::sim
