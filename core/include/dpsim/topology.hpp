#pragma once
// What a topology is, checked once, and the routes through a node: pure functions of the Topology that the
// loaders, the cost model and the simulator's platform share.
#include <vector>

#include "dpsim/collective_algorithm.hpp"
#include "dpsim/scenario.hpp"

namespace dpsim {

// Throws InputError ("FILE: key: message") for a topology no layer can route: sizes below 1, a link without
// bandwidth, a GPU behind no (or two) PCIe switches, root complexes with no inter-socket link, a mesh link that
// does not join two GPUs of the node or a mesh that leaves a GPU unreachable, several nodes without NICs or a
// network, a GPU served by no NIC. The loaders check the same rules with file:line (validate_topology); the
// simulator calls this on topologies built in code.
void check_topology(const Topology& topology);

// An NVLink mesh's routes: the bandwidth between each pair (parallel links add up) and, for each ordered pair,
// the GPUs a message passes (fewest hops, then the widest bottleneck; deterministic), a -> ... -> b.
struct MeshRoutes {
  std::vector<std::vector<double>> bytes_per_s;     // [a][b], symmetric, 0 where no direct link
  std::vector<std::vector<std::vector<int>>> path;  // [a][b]: GPUs from a to b inclusive; empty for a == b
};
MeshRoutes mesh_routes(const IntraNode& intra, int gpus_per_node);  // check_topology's rules hold

// The intra-node ring as NCCL spreads it over the node's links: NVSwitch / PCIe the cycle 0 -> 1 -> ... -> 0,
// share 1; an NVLink mesh one ring per NVLink, so every directed link carries a share of its GPU's ring traffic
// proportional to its bandwidth. Empty for one GPU.
std::vector<FlowSpace::Edge> intra_ring_edges(const IntraNode& intra, int gpus_per_node);

}  // namespace dpsim
