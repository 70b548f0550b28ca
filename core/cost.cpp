#include "dpsim/cost.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>

#include "algorithms/terms.hpp"
#include "dpsim/collective_algorithm.hpp"
#include "dpsim/error.hpp"
#include "dpsim/tuner_plugin.hpp"

namespace dpsim {

double FabricSummary::ring_bytes_per_s() const {
  return nodes > 1 ? std::min(intra_ring_bytes_per_s, inter_ring_bytes_per_s) : intra_ring_bytes_per_s;
}

namespace {

// PCIe: ring 0 -> 1 -> ... -> g-1 -> 0. Count the ring flows on each directed link; each peer-to-peer edge runs at
// its path's slowest link divided by the flows that share it, and the ring at its slowest such edge. An edge NCCL
// stages through host memory (nccl_uses_p2p) is counted apart: its rate is the host's (FabricSummary).
void pcie_ring(const Topology& t, int g, FabricSummary& f) {
  const IntraNode& intra = t.intra;
  std::map<int, int> switch_of;
  for (size_t s = 0; s < intra.switches.size(); ++s) {
    for (int gpu : intra.switches[s].gpus) switch_of[gpu] = static_cast<int>(s);
  }
  std::map<std::string, int> flows;
  std::map<std::string, Link> links;
  std::vector<std::vector<std::string>> p2p_paths;
  double worst_latency = 0;
  for (int i = 0; i < g && g > 1; ++i) {
    const int j = (i + 1) % g;
    const auto& a = intra.switches[static_cast<size_t>(switch_of[i])];
    const auto& b = intra.switches[static_cast<size_t>(switch_of[j])];
    std::vector<std::pair<std::string, Link>> path{{"gpu" + std::to_string(i) + ">", intra.gpu_link},
                                                   {">gpu" + std::to_string(j), intra.gpu_link}};
    if (&a != &b) {
      path.push_back({a.name + ">", a.uplink});
      path.push_back({">" + b.name, b.uplink});
      if (a.root != b.root) path.push_back({a.root + ">" + b.root, *intra.inter_socket});
    }
    double latency = 0;
    for (const auto& [id, link] : path) latency += link.latency_s;
    worst_latency = std::max(worst_latency, latency);
    ++f.intra_ring_edges;
    if (!nccl_uses_p2p(t, &a == &b)) {
      ++f.intra_shm_edges;
      continue;
    }
    p2p_paths.emplace_back();
    for (const auto& [id, link] : path) {
      flows[id]++;
      links[id] = link;
      p2p_paths.back().push_back(id);
    }
  }
  double bw = intra.gpu_link.bandwidth_bytes_per_s;
  for (const auto& path : p2p_paths)
    for (const auto& id : path) bw = std::min(bw, links[id].bandwidth_bytes_per_s / flows[id]);
  f.intra_ring_bytes_per_s = bw;
  f.intra_edge_latency_s = worst_latency;
  f.host_staged_bytes_per_s = intra.host_staged_bytes_per_s;
  f.pcie_link_bytes_per_s = intra.gpu_link.bandwidth_bytes_per_s;
}

// NVLink mesh: NCCL builds as many rings as each GPU has links, one per link direction, so a GPU's
// ring bandwidth is the sum of its NVLink bandwidth per direction; the ring runs at the poorest GPU's.
void mesh_ring(const IntraNode& intra, int g, FabricSummary& f) {
  std::vector<double> per_gpu(static_cast<size_t>(g), 0.0);
  double latency = 0;
  for (const auto& l : intra.mesh) {
    per_gpu[static_cast<size_t>(l.gpu_a)] += l.link.bandwidth_bytes_per_s;
    per_gpu[static_cast<size_t>(l.gpu_b)] += l.link.bandwidth_bytes_per_s;
    latency = std::max(latency, l.link.latency_s);
  }
  f.intra_ring_bytes_per_s = *std::min_element(per_gpu.begin(), per_gpu.end());
  f.intra_edge_latency_s = latency;
}

FabricSummary::NetworkPath network_path(const Topology& t) {
  using P = FabricSummary::NetworkPath;
  switch (t.network.kind) {
    case NetworkKind::none: return P::none;
    case NetworkKind::single_switch: return P::single_switch;
    case NetworkKind::fat_tree:
    case NetworkKind::rail_optimized:
      return (t.network.leaf_radix > 0 && t.nodes > t.network.leaf_radix) ? P::across_leaves : P::within_leaf;
  }
  return P::none;
}

double slowest_nic(const Topology& t) {
  double bw = t.nics.empty() ? 0.0 : std::numeric_limits<double>::infinity();
  for (const auto& nic : t.nics) bw = std::min(bw, nic.link.bandwidth_bytes_per_s);
  return bw;
}

// The uplinks of the leaves (fat tree) or rail groups (rail-optimized) of `leaf_radix` nodes, as
// sim/src/platform.cpp builds them: a leaf's uplink is members x (a node's NIC bandwidth) / oversubscription
// wide, rail c's members x (NIC c's bandwidth) / oversubscription. The ring visits nodes in order, so it
// leaves and enters each leaf or group once per direction, carrying one node's ring traffic: the smallest
// leaf (the last one may be partial) bounds it. Within one leaf or group the ring crosses no uplink.
double uplink_ring(const Topology& t) {
  const Network& net = t.network;
  const int radix = net.leaf_radix > 0 ? net.leaf_radix : t.nodes;
  const bool tiered = net.kind == NetworkKind::fat_tree || net.kind == NetworkKind::rail_optimized;
  if (!tiered || t.nodes <= radix || t.nics.empty()) return std::numeric_limits<double>::infinity();
  const int smallest = t.nodes % radix == 0 ? radix : t.nodes % radix;
  const double over = net.oversubscription > 0 ? net.oversubscription : 1.0;
  const double n = static_cast<double>(t.nics.size());
  double per_member = 0;  // a member node's share of the uplink, in the node's ring bytes per second
  if (net.kind == NetworkKind::fat_tree) {
    for (const auto& nic : t.nics) per_member += nic.link.bandwidth_bytes_per_s;
  } else {
    per_member = n * slowest_nic(t);  // rail c carries channel c, 1/n of the traffic: the slowest rail paces all
  }
  return smallest * per_member / over;
}

}  // namespace

FabricSummary summarize_fabric(const Topology& t) {
  FabricSummary f;
  f.nodes = t.nodes;
  f.gpus_per_node = t.gpus_per_node;
  f.world = t.world_size();
  f.arch = t.gpu.arch;
  f.cpu_vendor = t.cpu_vendor;
  f.intra_class = to_string(t.intra.kind);
  f.net_class = t.network.ring_class();
  f.nvls = t.intra.kind == IntraKind::nvswitch && t.intra.nvls;
  switch (t.intra.kind) {
    case IntraKind::nvswitch:
      f.intra_ring_bytes_per_s = t.intra.gpu_link.bandwidth_bytes_per_s;
      f.intra_edge_latency_s = 2 * t.intra.gpu_link.latency_s;
      break;
    case IntraKind::pcie: pcie_ring(t, t.gpus_per_node, f); break;
    case IntraKind::nvlink_mesh: mesh_ring(t.intra, t.gpus_per_node, f); break;
  }
  if (t.gpus_per_node == 1) f.intra_ring_bytes_per_s = std::numeric_limits<double>::infinity();
  double nic_latency = 0;
  for (const auto& nic : t.nics) nic_latency = std::max(nic_latency, nic.link.latency_s);
  f.nic_ring_bytes_per_s = static_cast<double>(t.nics.size()) * slowest_nic(t);
  f.nics_per_node = static_cast<int>(t.nics.size());
  f.sharp = t.network.sharp;
  f.uplink_ring_bytes_per_s = uplink_ring(t);
  f.inter_ring_bytes_per_s = std::min(f.nic_ring_bytes_per_s, f.uplink_ring_bytes_per_s);
  f.nic_latency_s = nic_latency;
  f.network_path = t.nodes > 1 ? network_path(t) : FabricSummary::NetworkPath::none;
  f.network_link_latency_s = t.network.link_latency_s;
  f.tuner_plugin = t.network.tuner_plugin;
  return f;
}

bool nccl_uses_p2p(const Topology& t, bool same_switch) {
  switch (t.intra.p2p) {
    case PcieP2p::disabled: return false;
    case PcieP2p::all_paths: return true;
    case PcieP2p::nccl_default: break;
  }
  if (!t.gpu.pcie_p2p) return false;
  return same_switch || (t.cpu_vendor == CpuVendor::amd && t.gpus_per_node <= 2);
}

double host_staged_rate(const FabricSummary& f, const NcclModel& nccl) {
  return f.host_staged_bytes_per_s > 0 ? f.host_staged_bytes_per_s
                                       : f.pcie_link_bytes_per_s * nccl.host_staged_fraction_of_link;
}

const char* host_staged_source(const FabricSummary& f) {
  return f.host_staged_bytes_per_s > 0 ? "intra_node.host_staged_bandwidth"
                                       : "not measured: data/nccl.yaml host_staged_fraction_of_link of the link";
}

double shm_busbw(const FabricSummary& f, const NcclModel& nccl) {
  return host_staged_rate(f, nccl) * nccl.ring_efficiency_for("shm", f.arch);
}

bool intra_shm_bound(const FabricSummary& f, const NcclModel& nccl) {
  return f.intra_shm_edges > 0 && shm_busbw(f, nccl) <= algorithms::intra_ring_busbw(f, nccl);
}

double ring_bytes_sent_per_gpu(double bytes, int world) { return world > 1 ? 2.0 * (world - 1) / world * bytes : 0.0; }

double ideal_ring_allreduce_seconds(double bytes, int world, double bandwidth_bytes_per_s) {
  return world > 1 ? ring_bytes_sent_per_gpu(bytes, world) / bandwidth_bytes_per_s : 0.0;
}

bool nccl_enables_by_default(Protocol p, const FabricSummary& f, const NcclModel& nccl) {
  if (p != Protocol::ll128) return true;
  const bool arch = std::find(nccl.ll128_default_archs.begin(), nccl.ll128_default_archs.end(), f.arch) !=
                    nccl.ll128_default_archs.end();
  // typeIntra <= PATH_NVB: the ring's GPU-to-GPU path is NVLink (one GPU per node: PATH_LOC, search.cc:1088)
  const bool nvlink_path = f.gpus_per_node == 1 || f.intra_class != "pcie";
  return arch && nvlink_path;
}

namespace {

// NCCL's choice among the algorithms and protocols `requested` allows: the least time by NCCL's own model; time_s is
// infinite where none runs.
CollectiveCost cheapest(CollectiveKind kind, double bytes, const FabricSummary& f, const NcclModel& nccl,
                        Collective requested) {
  CollectiveCost best;
  best.time_s = std::numeric_limits<double>::infinity();
  double best_tuner_s = best.time_s;  // NCCL chooses by its own model's time
  // NCCL also runs reduce-scatter and all-gather with NVLS (and PAT), which dpsim does not model yet: the
  // descriptors say which kinds each runs, and those kinds run on the ring here.
  for (const AlgorithmDescriptor* d : collective_algorithms()) {
    if (requested.algorithm != Algorithm::automatic && requested.algorithm != d->id) continue;
    // NCCL weighs the CollNet algorithms only with NCCL_COLLNET_ENABLE=1 (tuning.cc:504-506)
    if (requested.algorithm == Algorithm::automatic && d->in_network && !requested.collnet) continue;
    if (!algorithm_available(d->id, kind, f, nccl)) continue;
    for (Protocol p : {Protocol::ll, Protocol::ll128, Protocol::simple}) {
      if (requested.protocol != Protocol::automatic && requested.protocol != p) continue;
      if (requested.protocol == Protocol::automatic && !nccl_enables_by_default(p, f, nccl)) continue;
      const AlgorithmCost c = d->cost(kind, bytes, p, f, nccl);
      const double tuner_s = c.tuner_time_s > 0 ? c.tuner_time_s : c.time_s;
      if (c.ok && tuner_s < best_tuner_s) {
        best = {d->id, p, c.latency_s, 0, c.time_s, c.fill_s};
        best_tuner_s = tuner_s;
      }
    }
  }
  return best;
}

// The platform's tuner plugin picks the algorithm and protocol (NCCL takes its choice instead of its own,
// core/tuner_plugin.hpp) where the scenario leaves both to NCCL and the plugin's table holds the call.
std::optional<Collective> plugin_pick(CollectiveKind kind, double bytes, const FabricSummary& f, Collective requested) {
  if (!f.tuner_plugin || requested.algorithm != Algorithm::automatic || requested.protocol != Protocol::automatic)
    return std::nullopt;
  const auto choice = tuner_plugin_choice(*f.tuner_plugin, kind, bytes, f.nodes, f.gpus_per_node, f.nvls);
  if (!choice) return std::nullopt;
  return Collective{choice->algorithm, choice->protocol};
}

}  // namespace

CollectiveCost collective_cost(CollectiveKind kind, double bytes, const FabricSummary& f, const NcclModel& nccl,
                               Collective requested) {
  if (kind != CollectiveKind::all_reduce && kind != CollectiveKind::reduce_scatter &&
      kind != CollectiveKind::all_gather)
    throw RuntimeError(fmt::format("{}: no cost model for this collective kind yet", to_string(kind)));
  if (f.world < 2) return {Algorithm::ring, Protocol::simple, 0, 0, 0, 0};
  CollectiveCost best;
  best.time_s = std::numeric_limits<double>::infinity();
  if (auto pick = plugin_pick(kind, bytes, f, requested)) best = cheapest(kind, bytes, f, nccl, *pick);
  if (!std::isfinite(best.time_s)) best = cheapest(kind, bytes, f, nccl, requested);  // NCCL's own choice
  if (!std::isfinite(best.time_s)) {
    const std::string why = requested.algorithm == Algorithm::automatic
                                ? std::string()
                                : algorithm_unavailable_reason(requested.algorithm, kind, f, nccl);
    throw InputError(fmt::format("collective: algorithm {} with protocol {} is not available for {} on this cluster{}",
                                 to_string(requested.algorithm), to_string(requested.protocol), to_string(kind),
                                 why.empty() ? "" : ": " + why));
  }
  best.busbw_bytes_per_s = bytes_moved_per_rank(kind, f.world, bytes) / best.time_s;
  return best;
}

CollectiveCost launched_from_torch(CollectiveCost cost, CollectiveKind kind, double bytes, int world,
                                   const NcclModel& nccl) {
  cost.time_s += nccl.framework_launch_overhead_s;
  cost.busbw_bytes_per_s = bytes_moved_per_rank(kind, world, bytes) / cost.time_s;
  return cost;
}

CollectiveCost launched_from_one_thread(CollectiveCost cost, CollectiveKind kind, double bytes, int world,
                                        int gpus_per_thread, const NcclModel& nccl) {
  cost.time_s = std::max(cost.time_s, gpus_per_thread * nccl.single_thread_launch_per_gpu_s);
  cost.busbw_bytes_per_s = bytes_moved_per_rank(kind, world, bytes) / cost.time_s;
  return cost;
}

CollectiveCost as_launched(const CollectiveCost& cost, CallLaunch launch, CollectiveKind kind, double bytes,
                           const FabricSummary& f, const NcclModel& nccl) {
  switch (launch) {
    case CallLaunch::torch: return launched_from_torch(cost, kind, bytes, f.world, nccl);
    case CallLaunch::single_thread: return launched_from_one_thread(cost, kind, bytes, f.world, f.gpus_per_node, nccl);
    case CallLaunch::nccl_tests: break;
  }
  return cost;
}

CollectiveCost allreduce_cost(double bytes, const FabricSummary& f, const NcclModel& nccl, Collective requested) {
  return collective_cost(CollectiveKind::all_reduce, bytes, f, nccl, requested);
}

}  // namespace dpsim
