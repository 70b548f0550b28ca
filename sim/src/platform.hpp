#pragma once
// Topology -> the simulator's platform: hosts, links (indices, with their capacities) and the route between any two
// hosts, computed on demand (trees and small meshes: no N^2 routing table, so 16k-GPU platforms build in
// milliseconds). Nothing here is SimGrid's: the direct engine and the fluid probe use it as it is, and the SimGrid
// engine (simgrid_engine.cpp) lays the same hosts and links in one netzone whose routes come from route().
//
// Hosts are the endpoints of simulated flows:
//   gpu(node, local)     a GPU (only for the nodes whose GPUs are simulated, see `reduced`);
//   nvswitch(node)       the NVSwitch as the reducing endpoint of NVLS;
//   channel(node, c)     where inter-node channel c leaves node `node` (its NIC).
// Link capacity = nominal (topology YAML) x NCCL ring efficiency of the link class
// (scenario.nccl.ring_efficiency: nvswitch | pcie | nvlink_mesh | net). Links carry no latency:
// the collective's latency is NCCL's alpha term, added by the collective driver.
//
// reduced = true (fast fidelity) uses two exact symmetry reductions:
//   - every node is identical and intra-node links are private to a node, so only node 0's GPUs
//     are simulated for intra-node traffic;
//   - when all NICs of a node have the same bandwidth, the channels are symmetric: only channel 0
//     is simulated, carrying 1/nics of the inter-node data, and a fabric link shared by all
//     channels (fat-tree leaf uplink) gets 1/nics of its capacity. Max-min sharing gives every
//     flow of a symmetric orbit the same rate, so the time is unchanged.
// reduced = false (step fidelity) builds every GPU, every NIC and every fabric link as they are.
#include <memory>
#include <string>
#include <vector>

#include "dpsim/collective_algorithm.hpp"
#include "dpsim/scenario.hpp"
#include "engine.hpp"

namespace dpsim::sim {

// Speed of the compute host that runs a rank's compute timeline: one op is a nanosecond of GPU time (the step
// actors execute seconds x this many ops). One constant for the platform and the actors.
inline constexpr double kComputeOpsPerSecond = 1e9;

struct PlatformStats {
  int hosts = 0;
  int links = 0;  // one per direction
};

// The platform is the FlowSpace of the world: the collective algorithms (core/algorithms/) lay their flows on it.
class Platform final : public FlowSpace {
 public:
  // `timelines`: compute hosts, one per rank class whose compute runs at once (pipeline stages).
  Platform(const Scenario& scenario, bool reduced, int timelines = 1);
  ~Platform();
  Platform(const Platform&) = delete;
  Platform& operator=(const Platform&) = delete;

  int nodes() const override { return nodes_; }
  int gpus_per_node() const override { return gpus_per_node_; }
  int simulated_nodes() const override { return simulated_nodes_; }  // nodes whose GPUs exist as hosts
  int channels() const override { return channels_; }                // inter-node channels simulated per node
  double channel_share() const override { return channel_share_; }   // fraction of inter-node data per channel
  bool has_nvswitch() const;
  bool reduced() const { return reduced_; }

  int gpu(int node, int local) const override;
  int nvswitch(int node) const override;
  int channel(int node, int c) const override;

  // The network hosts (GPUs, NVSwitches, channels) by index, and the compute hosts (off the network) by timeline.
  const std::vector<std::string>& host_names() const { return host_names_; }
  const std::vector<ComputeHost>& compute_hosts() const { return compute_hosts_; }
  PlatformStats stats() const;

  // NVSwitch / PCIe: the cycle 0 -> 1 -> ... -> 0, share 1. NVLink mesh: NCCL runs one ring per NVLink, so every
  // directed link carries a share proportional to its bandwidth (a GPU's traffic spreads over all its links).
  const std::vector<Edge>& intra_ring_edges() const override;

  // The links from host `src` to host `dst`, appended to `out` as indices into link_capacities() (bytes/s, one
  // per direction: 2k is duplex link k's up direction, 2k + 1 its down).
  void route(int src, int dst, std::vector<int>& out) const;
  std::vector<int> route_links(int src, int dst) const;
  const std::vector<double>& link_capacities() const;
  const std::vector<std::string>& duplex_link_names() const;  // [link / 2]

  struct Impl;

 private:
  void lay_channels();
  void add_hosts();
  void add_intra_node_links();
  void add_inter_node_links();

  std::unique_ptr<Impl> impl_;
  int nodes_ = 1, gpus_per_node_ = 1, simulated_nodes_ = 1, channels_ = 0;
  double channel_share_ = 1;
  bool reduced_ = true;
  std::vector<std::string> host_names_;
  std::vector<ComputeHost> compute_hosts_;
  int timelines_ = 1;
};

}  // namespace dpsim::sim
