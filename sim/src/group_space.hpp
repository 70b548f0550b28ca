#pragma once
// One process group's view of the platform: the FlowSpace its collectives' flows run on. The group's nodes are its
// nodes (in rank order), its GPUs on each node the ranks it has there, its channels the NICs that serve those GPUs
// (one channel per distinct NIC, leaving through the group's first GPU that NIC serves), so that groups of one kind
// that share a NIC or a switch uplink share it in the simulation. Needs the full platform (not `reduced`).
#include <vector>

#include "dpsim/groups.hpp"
#include "platform.hpp"

namespace dpsim::sim {

class GroupSpace final : public FlowSpace {
 public:
  // RuntimeError for a group the flows cannot be laid for: a reduced platform, or part of an NVLink-mesh node.
  GroupSpace(const Platform& platform, const Topology& topology, const ProcessGroup& group);
  int nodes() const override { return static_cast<int>(nodes_.size()); }
  int gpus_per_node() const override { return static_cast<int>(locals_.size()); }
  int simulated_nodes() const override { return nodes(); }
  int channels() const override { return static_cast<int>(channel_gpu_.size()); }
  double channel_share() const override { return channel_gpu_.empty() ? 1.0 : 1.0 / channels(); }
  int gpu(int node, int local) const override;
  int nvswitch(int node) const override;
  int channel(int node, int c) const override;
  const std::vector<Edge>& intra_ring_edges() const override { return edges_; }

 private:
  const Platform& platform_;
  std::vector<int> nodes_;        // platform node of the group's node v
  std::vector<int> locals_;       // platform-local GPU of the group's GPU x (the same on every node)
  std::vector<int> channel_gpu_;  // platform-local GPU through which channel c leaves a node
  std::vector<Edge> edges_;
};

// The spaces a call over groups of `kind` runs on: every group of that kind at once (all ranks run the same
// program), or the platform itself where one group spans the whole world.
// `stage` >= 0: only the groups of that pipeline stage (its rank class runs their calls).
std::vector<GroupSpace> group_spaces(const Platform& platform, const Topology& topology, GroupKind kind,
                                     const ParallelDims& dims, int stage = -1);
// Whether every group of `kind` is the whole world (the platform itself is its space; a reduced platform serves).
bool spans_world(GroupKind kind, const ParallelDims& dims);

}  // namespace dpsim::sim
