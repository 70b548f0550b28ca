#include "terms.hpp"

#include <algorithm>
#include <cmath>

namespace dpsim::algorithms {

Fabric intra_fabric(const FabricSummary& f) { return f.intra_class == "pcie" ? Fabric::pcie : Fabric::nvlink; }

double base_latency(const NcclModel& nccl, Algorithm a, Protocol p) {
  const auto it = nccl.base_latency_s.find(a);
  return it == nccl.base_latency_s.end() ? 0.0 : std::max(0.0, it->second.get(p));
}

double intra_ring_busbw(const FabricSummary& f, const NcclModel& nccl) {
  return f.intra_ring_bytes_per_s * nccl.ring_efficiency_for(f.intra_class, f.arch);
}

double ring_busbw(const FabricSummary& f, const NcclModel& nccl) {
  const double intra = intra_ring_busbw(f, nccl);
  if (f.nodes == 1) return intra;
  return std::min(intra, f.inter_ring_bytes_per_s * nccl.ring_efficiency_for(f.net_class, f.arch));
}

double protocol_busbw(double busbw, Protocol p, const FabricSummary& f, const NcclModel& nccl) {
  double bw = busbw * nccl.protocol_efficiency.get(p);
  if (p == Protocol::ll) {
    const auto cap = nccl.ll_max_busbw_bytes_per_s.find(f.arch);
    if (cap != nccl.ll_max_busbw_bytes_per_s.end()) bw = std::min(bw, cap->second);
  }
  return bw;
}

double tree_correction(const NcclModel& nccl, Protocol p, double bytes) {
  const auto it = nccl.tree_correction.find(p);
  if (it == nccl.tree_correction.end() || bytes < 64) return 1.0;
  const auto index = static_cast<size_t>(std::floor(std::log2(bytes / 64.0)));
  return index < it->second.size() ? it->second[index] : 1.0;
}

int one_round(const FlowSpace&, CollectiveKind) { return 1; }

namespace {

// Binary tree over 0..n-1 in heap order; the second tree mirrors the ranks (NCCL's ncclGetDtree uses a mirrored or
// shifted copy so that most nodes are interior in only one tree).
int parent(int v, int n, int tree) {
  if (tree == 0) return v == 0 ? -1 : (v - 1) / 2;
  const int u = n - 1 - v;
  return u == 0 ? -1 : n - 1 - (u - 1) / 2;
}

}  // namespace

void append_inter_node_double_tree(const FlowSpace& p, std::vector<Flow>& out) {
  const int n = p.nodes();
  if (n < 2) return;
  const double half = 0.5 * p.channel_share();
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

}  // namespace dpsim::algorithms

namespace dpsim {

double inter_edge_latency(const FabricSummary& f, const NcclModel& nccl) {
  using P = FabricSummary::NetworkPath;
  const int hops = f.network_path == P::single_switch   ? nccl.hops_single_switch
                   : f.network_path == P::within_leaf   ? nccl.hops_within_leaf
                   : f.network_path == P::across_leaves ? nccl.hops_across_leaves
                                                        : 0;
  return 2 * f.nic_latency_s + hops * f.network_link_latency_s;
}

double edge_excess_latency(const FabricSummary& f, const NcclModel& nccl, bool inter) {
  const std::string& cls = inter ? f.net_class : f.intra_class;
  const auto table = nccl.table_edge_latency_s.find(cls);
  if (table == nccl.table_edge_latency_s.end()) return 0.0;  // a model without the key (tests' hand-built ones)
  const double edge = inter ? inter_edge_latency(f, nccl) : f.intra_edge_latency_s;
  return std::max(0.0, edge - table->second);
}

}  // namespace dpsim
