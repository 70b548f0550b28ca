#include "dpsim/topology.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>

#include "dpsim/error.hpp"
#include "load_internal.hpp"

namespace dpsim {

namespace {

void check_links(const Topology& t, const std::function<void(const std::string&)>& fail) {
  auto positive = [&](const Link& l, const std::string& key) {
    if (!(l.bandwidth_bytes_per_s > 0)) fail(fmt::format("{}: a link needs a bandwidth above 0", key));
  };
  if (t.intra.kind != IntraKind::nvlink_mesh && t.gpus_per_node > 1) positive(t.intra.gpu_link, "intra_node.bandwidth");
  for (size_t s = 0; s < t.intra.switches.size(); ++s)
    positive(t.intra.switches[s].uplink, fmt::format("intra_node.switches[{}].uplink", s));
  if (t.intra.inter_socket) positive(*t.intra.inter_socket, "intra_node.inter_socket");
  for (size_t i = 0; i < t.intra.mesh.size(); ++i) {
    const MeshLink& l = t.intra.mesh[i];
    if (l.gpu_a < 0 || l.gpu_b < 0 || l.gpu_a >= t.gpus_per_node || l.gpu_b >= t.gpus_per_node || l.gpu_a == l.gpu_b)
      fail(fmt::format("intra_node.links[{}].gpus: a mesh link joins exactly two different GPUs of the node's {}", i,
                       t.gpus_per_node));
    positive(l.link, fmt::format("intra_node.links[{}]", i));
  }
  for (size_t c = 0; c < t.nics.size(); ++c) {
    positive(t.nics[c].link, fmt::format("nics[{}]", c));
    for (int x : t.nics[c].gpus)
      if (x < 0) fail(fmt::format("nics[{}].gpus: GPU {} does not exist", c, x));
  }
  for (size_t s = 0; s < t.intra.switches.size(); ++s)
    for (int x : t.intra.switches[s].gpus)
      if (x < 0) fail(fmt::format("intra_node.switches[{}].gpus: GPU {} does not exist", s, x));
}

}  // namespace

void check_topology(const Topology& t) {
  const std::string file = t.file.empty() ? t.name : t.file;
  const auto fail = [&](const std::string& message) -> void { throw InputError(fmt::format("{}: {}", file, message)); };
  if (t.nodes < 1 || t.gpus_per_node < 1)
    fail(fmt::format("{} nodes x {} GPUs per node: each must be at least 1", t.nodes, t.gpus_per_node));
  check_links(t, fail);
  validate_topology(t, fail);
}

MeshRoutes mesh_routes(const IntraNode& intra, int g) {
  const auto n = static_cast<size_t>(g);
  MeshRoutes r;
  r.bytes_per_s.assign(n, std::vector<double>(n, 0.0));
  for (const MeshLink& l : intra.mesh) {
    r.bytes_per_s[static_cast<size_t>(l.gpu_a)][static_cast<size_t>(l.gpu_b)] += l.link.bandwidth_bytes_per_s;
    r.bytes_per_s[static_cast<size_t>(l.gpu_b)][static_cast<size_t>(l.gpu_a)] += l.link.bandwidth_bytes_per_s;
  }
  r.path.assign(n, std::vector<std::vector<int>>(n));
  for (int a = 0; a < g; ++a) {
    // BFS by hops; among equal hops keep the path with the widest bottleneck.
    std::vector<int> hops(n, -1), prev(n, -1);
    std::vector<double> width(n, 0);
    std::deque<int> q{a};
    hops[static_cast<size_t>(a)] = 0;
    width[static_cast<size_t>(a)] = 1e300;
    while (!q.empty()) {
      const int u = q.front();
      q.pop_front();
      for (int w = 0; w < g; ++w) {
        const double b = r.bytes_per_s[static_cast<size_t>(u)][static_cast<size_t>(w)];
        if (b <= 0) continue;
        const double wd = std::min(width[static_cast<size_t>(u)], b);
        int& hw = hops[static_cast<size_t>(w)];
        if (hw < 0) {
          hw = hops[static_cast<size_t>(u)] + 1;
          prev[static_cast<size_t>(w)] = u;
          width[static_cast<size_t>(w)] = wd;
          q.push_back(w);
        } else if (hw == hops[static_cast<size_t>(u)] + 1 && wd > width[static_cast<size_t>(w)]) {
          prev[static_cast<size_t>(w)] = u;
          width[static_cast<size_t>(w)] = wd;
        }
      }
    }
    for (int b = 0; b < g; ++b) {
      if (b == a) continue;
      if (hops[static_cast<size_t>(b)] < 0)
        throw RuntimeError(fmt::format("intra_node.links: GPU {} cannot reach GPU {} (check_topology not run)", a, b));
      std::vector<int>& path = r.path[static_cast<size_t>(a)][static_cast<size_t>(b)];
      for (int u = b; u != a; u = prev[static_cast<size_t>(u)]) path.push_back(u);
      path.push_back(a);
      std::reverse(path.begin(), path.end());
    }
  }
  return r;
}

std::vector<FlowSpace::Edge> intra_ring_edges(const IntraNode& intra, int g) {
  std::vector<FlowSpace::Edge> edges;
  if (g < 2) return edges;
  if (intra.kind != IntraKind::nvlink_mesh) {
    for (int x = 0; x < g; ++x) edges.push_back({x, (x + 1) % g, 1.0});
    return edges;
  }
  std::vector<double> sum(static_cast<size_t>(g), 0);
  std::map<std::pair<int, int>, double> pair_bw;
  for (const MeshLink& l : intra.mesh) {
    sum[static_cast<size_t>(l.gpu_a)] += l.link.bandwidth_bytes_per_s;
    sum[static_cast<size_t>(l.gpu_b)] += l.link.bandwidth_bytes_per_s;
    pair_bw[{std::min(l.gpu_a, l.gpu_b), std::max(l.gpu_a, l.gpu_b)}] += l.link.bandwidth_bytes_per_s;
  }
  for (const auto& [ab, w] : pair_bw) {
    edges.push_back({ab.first, ab.second, w / sum[static_cast<size_t>(ab.first)]});
    edges.push_back({ab.second, ab.first, w / sum[static_cast<size_t>(ab.second)]});
  }
  return edges;
}

}  // namespace dpsim
