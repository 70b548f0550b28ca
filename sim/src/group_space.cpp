#include "group_space.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "dpsim/error.hpp"

namespace dpsim::sim {

GroupSpace::GroupSpace(const Platform& platform, const Topology& topology, const ProcessGroup& group)
    : platform_(platform) {
  if (platform.reduced()) throw RuntimeError("simulator: a process group's flows need the full platform");
  const int g = topology.gpus_per_node;
  for (int rank : group.ranks) {
    const int node = rank / g, local = rank % g;
    if (nodes_.empty() || nodes_.back() != node) nodes_.push_back(node);
    if (nodes_.size() == 1) locals_.push_back(local);
  }
  const bool whole_node = static_cast<int>(locals_.size()) == g;
  if (whole_node) {
    edges_ = platform.intra_ring_edges();
  } else if (topology.intra.kind == IntraKind::nvlink_mesh) {
    throw RuntimeError(fmt::format("simulator: a group of {} of the {} GPUs of an NVLink-mesh node is not modelled",
                                   locals_.size(), g));
  } else if (locals_.size() > 1) {
    const int k = static_cast<int>(locals_.size());
    for (int x = 0; x < k; ++x) edges_.push_back({x, (x + 1) % k, 1.0});
  }
  if (nodes_.size() > 1)
    for (const Nic& nic : topology.nics)
      for (int local : locals_)
        if (std::find(nic.gpus.begin(), nic.gpus.end(), local) != nic.gpus.end()) {
          channel_gpu_.push_back(local);
          break;
        }
}

int GroupSpace::gpu(int node, int local) const {
  return platform_.gpu(nodes_.at(static_cast<size_t>(node)), locals_.at(static_cast<size_t>(local)));
}

int GroupSpace::nvswitch(int node) const { return platform_.nvswitch(nodes_.at(static_cast<size_t>(node))); }

int GroupSpace::channel(int node, int c) const {
  return platform_.gpu(nodes_.at(static_cast<size_t>(node)), channel_gpu_.at(static_cast<size_t>(c)));
}

bool spans_world(GroupKind kind, const ParallelDims& dims) { return group_size(kind, dims) == dims.world(); }

std::vector<GroupSpace> group_spaces(const Platform& platform, const Topology& topology, GroupKind kind,
                                     const ParallelDims& dims, int stage) {
  std::vector<GroupSpace> out;
  for (const ProcessGroup& group : groups_of(kind, dims))
    if (stage < 0 || coords_of(group.ranks.front(), dims).pipeline == stage)
      out.emplace_back(platform, topology, group);
  return out;
}

}  // namespace dpsim::sim
