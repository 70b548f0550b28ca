// Topology -> the simulator's platform: hosts, links and routes as indices (see platform.hpp).
#include "platform.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <map>

#include "dpsim/error.hpp"
#include "dpsim/topology.hpp"

namespace dpsim::sim {

namespace {

enum class HostKind { gpu, nvswitch, channel, compute };
struct HostInfo {
  HostKind kind = HostKind::gpu;
  int node = 0;
  int local = 0;  // GPU index, or channel index
};

struct DuplexLink {
  int up = -1;  // "A -> B" direction (GPU -> switch, node -> fabric, lower -> higher): an index of the platform's links
  int down = -1;  // "B -> A"
};

double efficiency(const Scenario& scenario, const std::string& link_class) {
  if (!scenario.nccl.ring_efficiency.count(link_class))
    throw InputError(fmt::format("{}: ring_efficiency.{}: missing (the simulator scales every {} link by it)",
                                 scenario.nccl.file.empty() ? std::string("data/nccl.yaml") : scenario.nccl.file,
                                 link_class, link_class));
  const double e = scenario.nccl.ring_efficiency_for(link_class, scenario.topology.gpu.arch);
  if (!(e > 0 && e <= 1)) throw InputError(fmt::format("ring_efficiency.{}: must be in (0, 1], got {}", link_class, e));
  return e;
}

}  // namespace

struct Platform::Impl {
  const Scenario* scenario = nullptr;
  const Topology* topo = nullptr;
  std::vector<HostInfo> hosts;  // network hosts, then the compute hosts
  int gpu_base = 0, nvswitch_base = -1, channel_base = -1;
  bool channel_quotient = false;  // only channel 0 simulated, shared fabric links scaled
  // links
  std::vector<std::vector<DuplexLink>> gpu_link;                // [sim node][local]: nvswitch / pcie GPU link
  std::vector<std::vector<DuplexLink>> sw_up;                   // [sim node][pcie switch]
  std::vector<std::vector<DuplexLink>> socket;                  // [sim node][root]: root complex <-> socket fabric
  std::vector<std::map<std::pair<int, int>, DuplexLink>> mesh;  // [sim node][(a<b)]
  std::vector<std::vector<std::vector<int>>> mesh_path;         // [a][b] -> GPU hops, same for every node
  std::vector<std::vector<DuplexLink>> nic;                     // [node][nic] (only simulated channels' NICs)
  std::vector<DuplexLink> leaf_up;                              // fat tree: [leaf]
  std::vector<std::vector<DuplexLink>> rail_up;                 // rail optimized: [group][rail]
  std::vector<int> gpu_switch, gpu_root_index, gpu_nic;         // per local GPU
  std::vector<std::string> roots;
  std::vector<FlowSpace::Edge> ring_edges;
  std::vector<std::string> duplex_names;  // [link index / 2]
  std::vector<double> capacities;         // [link index], bytes/s: 2k the up direction of duplex link k, 2k + 1 down

  DuplexLink make_link(const std::string& name, double bytes_per_s) {
    if (!(bytes_per_s > 0))  // check_topology refuses links without bandwidth
      throw RuntimeError(fmt::format("simulator: link {} of {} has no bandwidth", name, topo->file));
    const auto up = static_cast<int>(capacities.size());
    duplex_names.push_back(name);
    capacities.push_back(bytes_per_s);
    capacities.push_back(bytes_per_s);
    return DuplexLink{up, up + 1};
  }

  int nic_index_of_channel(int c) const { return channel_quotient ? 0 : c; }

  void intra_route(int node, int a, int b, std::vector<int>& out) const;
  void fabric_route(int node_a, int nic_a, int node_b, int nic_b, std::vector<int>& out) const;
};

Platform::Platform(const Scenario& scenario, bool reduced, int timelines)
    : impl_(std::make_unique<Impl>()), reduced_(reduced), timelines_(std::max(1, timelines)) {
  const Topology& t = scenario.topology;
  check_topology(t);  // the one set of topology rules (core); what follows assumes them
  Impl& m = *impl_;
  m.scenario = &scenario;
  m.topo = &t;
  nodes_ = t.nodes;
  gpus_per_node_ = t.gpus_per_node;
  simulated_nodes_ = reduced ? 1 : nodes_;
  lay_channels();
  add_hosts();
  add_intra_node_links();
  m.ring_edges = dpsim::intra_ring_edges(t.intra, gpus_per_node_);
  if (nodes_ > 1) add_inter_node_links();
}

// NICs: channels across nodes (NCCL lays one ring/tree channel through each NIC). The fast fidelity simulates only
// channel 0 when every NIC has the same bandwidth (the channels are symmetric).
void Platform::lay_channels() {
  Impl& m = *impl_;
  const Topology& t = *m.topo;
  const int nics = static_cast<int>(t.nics.size());
  if (nodes_ > 1) {
    bool symmetric = true;
    for (const Nic& n : t.nics)
      symmetric = symmetric && n.link.bandwidth_bytes_per_s == t.nics[0].link.bandwidth_bytes_per_s && !n.gpus.empty();
    m.channel_quotient = reduced_ && symmetric;
    channels_ = m.channel_quotient ? 1 : nics;
    channel_share_ = 1.0 / nics;
  }
  m.gpu_nic.assign(static_cast<size_t>(gpus_per_node_), -1);
  for (int c = 0; c < nics; ++c)
    for (int x : t.nics[static_cast<size_t>(c)].gpus) m.gpu_nic[static_cast<size_t>(x)] = c;
}

// Hosts. GPU hosts run no code (a flow goes from host to host), so they have no speed.
void Platform::add_hosts() {
  Impl& m = *impl_;
  auto add_host = [&](const std::string& name, HostInfo info) {
    host_names_.push_back(name);
    m.hosts.push_back(info);
  };
  m.gpu_base = 0;
  for (int v = 0; v < simulated_nodes_; ++v)
    for (int x = 0; x < gpus_per_node_; ++x) add_host(fmt::format("n{}g{}", v, x), {HostKind::gpu, v, x});
  if (has_nvswitch()) {
    m.nvswitch_base = static_cast<int>(host_names_.size());
    for (int v = 0; v < simulated_nodes_; ++v) add_host(fmt::format("n{}nvswitch", v), {HostKind::nvswitch, v, 0});
  }
  if (nodes_ > 1 && reduced_) {
    m.channel_base = static_cast<int>(host_names_.size());
    for (int v = 0; v < nodes_; ++v)
      for (int c = 0; c < channels_; ++c) add_host(fmt::format("n{}ch{}", v, c), {HostKind::channel, v, c});
  }
  // The compute timeline of a rank (all ranks are identical): pstate 0 alone, the others beside a collective of
  // each overlap level (dpsim/overlap.hpp).
  const auto slowdowns = overlap_slowdowns(m.scenario->nccl, m.scenario->topology.gpu);
  PstateSpeeds speeds{};
  for (int level = 0; level < kOverlapLevels; ++level)
    speeds[static_cast<size_t>(level)] = kComputeOpsPerSecond / slowdowns[static_cast<size_t>(level)];
  for (int k = 0; k < timelines_; ++k) {
    compute_hosts_.push_back({k == 0 ? std::string("compute") : fmt::format("compute{}", k), speeds});
    m.hosts.push_back({HostKind::compute, 0, k});
  }
}

// Intra-node links of every simulated node: GPU links (NVSwitch, PCIe), switch uplinks and the socket fabric
// (PCIe), NVLinks (mesh, with its routes).
void Platform::add_intra_node_links() {
  Impl& m = *impl_;
  const IntraNode& in = m.topo->intra;
  const int g = gpus_per_node_;
  if (g < 2 && !in.nvls) return;
  const std::string intra_class = to_string(in.kind);
  const double eff = efficiency(*m.scenario, intra_class);
  const auto nodes = static_cast<size_t>(simulated_nodes_);
  m.gpu_link.resize(nodes);
  m.sw_up.resize(nodes);
  m.socket.resize(nodes);
  m.mesh.resize(nodes);
  if (in.kind == IntraKind::pcie) {
    m.gpu_switch.assign(static_cast<size_t>(g), -1);
    m.gpu_root_index.assign(static_cast<size_t>(g), 0);
    for (size_t s = 0; s < in.switches.size(); ++s) {
      const PcieSwitch& sw = in.switches[s];
      if (std::find(m.roots.begin(), m.roots.end(), sw.root) == m.roots.end()) m.roots.push_back(sw.root);
      for (int x : sw.gpus) m.gpu_switch[static_cast<size_t>(x)] = static_cast<int>(s);
    }
    for (int x = 0; x < g; ++x) {
      const std::string& r = in.switches[static_cast<size_t>(m.gpu_switch[static_cast<size_t>(x)])].root;
      m.gpu_root_index[static_cast<size_t>(x)] =
          static_cast<int>(std::find(m.roots.begin(), m.roots.end(), r) - m.roots.begin());
    }
  }
  if (in.kind == IntraKind::nvlink_mesh) {
    const MeshRoutes routes = mesh_routes(in, g);  // the same in every node
    m.mesh_path = routes.path;
    for (int v = 0; v < simulated_nodes_; ++v)
      for (int a = 0; a < g; ++a)
        for (int b = a + 1; b < g; ++b)
          if (double w = routes.bytes_per_s[static_cast<size_t>(a)][static_cast<size_t>(b)]; w > 0)
            m.mesh[static_cast<size_t>(v)][{a, b}] = m.make_link(fmt::format("n{}nvl{}-{}", v, a, b), w * eff);
  }
  for (int v = 0; v < simulated_nodes_; ++v) {
    auto& gpu_links = m.gpu_link[static_cast<size_t>(v)];
    if (in.kind == IntraKind::nvswitch || in.kind == IntraKind::pcie)
      for (int x = 0; x < g; ++x)
        gpu_links.push_back(
            m.make_link(fmt::format("n{}g{}-{}", v, x, intra_class), in.gpu_link.bandwidth_bytes_per_s * eff));
    if (in.kind != IntraKind::pcie) continue;
    for (const PcieSwitch& sw : in.switches)
      m.sw_up[static_cast<size_t>(v)].push_back(
          m.make_link(fmt::format("n{}{}-uplink", v, sw.name), sw.uplink.bandwidth_bytes_per_s * eff));
    if (m.roots.size() == 2)
      m.socket[static_cast<size_t>(v)].push_back(
          m.make_link(fmt::format("n{}inter-socket", v), in.inter_socket->bandwidth_bytes_per_s * eff));
    else if (m.roots.size() > 2)
      for (const std::string& r : m.roots)
        m.socket[static_cast<size_t>(v)].push_back(
            m.make_link(fmt::format("n{}{}-socket", v, r), in.inter_socket->bandwidth_bytes_per_s * eff));
  }
}

// NICs and the fabric: a fat tree's leaf uplinks or a rail-optimized fabric's rail uplinks.
void Platform::add_inter_node_links() {
  Impl& m = *impl_;
  const Topology& t = *m.topo;
  const double eff = efficiency(*m.scenario, t.network.ring_class());
  const int nics = static_cast<int>(t.nics.size());
  m.nic.resize(static_cast<size_t>(nodes_));
  for (int v = 0; v < nodes_; ++v)
    for (int c = 0; c < channels_; ++c)
      m.nic[static_cast<size_t>(v)].push_back(
          m.make_link(fmt::format("n{}nic{}", v, c), t.nics[static_cast<size_t>(c)].link.bandwidth_bytes_per_s * eff));
  const Network& net = t.network;
  const double over = net.oversubscription > 0 ? net.oversubscription : 1.0;
  const int radix = net.leaf_radix > 0 ? net.leaf_radix : nodes_;
  double node_nic_bw = 0;
  for (const Nic& n : t.nics) node_nic_bw += n.link.bandwidth_bytes_per_s;
  if (net.kind == NetworkKind::fat_tree) {
    const int leaves = (nodes_ + radix - 1) / radix;
    if (leaves > 1)
      for (int l = 0; l < leaves; ++l) {
        const int members = std::min(radix, nodes_ - l * radix);
        double cap = members * node_nic_bw / over * eff;
        if (m.channel_quotient) cap /= static_cast<double>(nics);  // shared by every channel
        m.leaf_up.push_back(m.make_link(fmt::format("leaf{}-uplink", l), cap));
      }
  } else if (net.kind == NetworkKind::rail_optimized) {
    const int groups = (nodes_ + radix - 1) / radix;
    if (groups > 1 || nics > 1)
      for (int grp = 0; grp < groups; ++grp) {
        const int members = std::min(radix, nodes_ - grp * radix);
        std::vector<DuplexLink> rails;
        for (int c = 0; c < channels_; ++c)  // a rail carries only its own channel: no quotient scaling
          rails.push_back(
              m.make_link(fmt::format("su{}rail{}-uplink", grp, c),
                          members * t.nics[static_cast<size_t>(c)].link.bandwidth_bytes_per_s / over * eff));
        m.rail_up.push_back(std::move(rails));
      }
  }
}

Platform::~Platform() = default;

bool Platform::has_nvswitch() const { return impl_->topo->intra.kind == IntraKind::nvswitch && gpus_per_node_ > 0; }

int Platform::gpu(int node, int local) const {
  if (node < 0 || node >= simulated_nodes_ || local < 0 || local >= gpus_per_node_)
    throw RuntimeError(fmt::format("simulator: GPU {} of node {} is not simulated", local, node));
  return impl_->gpu_base + node * gpus_per_node_ + local;
}

int Platform::nvswitch(int node) const {
  if (impl_->nvswitch_base < 0 || node < 0 || node >= simulated_nodes_)
    throw RuntimeError("simulator: no NVSwitch endpoint on this platform");
  return impl_->nvswitch_base + node;
}

int Platform::channel(int node, int c) const {
  if (node < 0 || node >= nodes_ || c < 0 || c >= channels_)
    throw RuntimeError(fmt::format("simulator: channel {} of node {} does not exist", c, node));
  if (reduced_) return impl_->channel_base + node * channels_ + c;
  return gpu(node, impl_->topo->nics[static_cast<size_t>(c)].gpus.front());
}

const std::vector<FlowSpace::Edge>& Platform::intra_ring_edges() const { return impl_->ring_edges; }

PlatformStats Platform::stats() const {
  return PlatformStats{static_cast<int>(host_names_.size()) + 1, static_cast<int>(impl_->capacities.size())};
}

void Platform::Impl::intra_route(int node, int a, int b, std::vector<int>& out) const {
  const auto v = static_cast<size_t>(node);
  switch (topo->intra.kind) {
    case IntraKind::nvswitch:
      out.push_back(gpu_link[v][static_cast<size_t>(a)].up);
      out.push_back(gpu_link[v][static_cast<size_t>(b)].down);
      return;
    case IntraKind::pcie: {
      out.push_back(gpu_link[v][static_cast<size_t>(a)].up);
      int sa = gpu_switch[static_cast<size_t>(a)], sb = gpu_switch[static_cast<size_t>(b)];
      if (sa != sb) {
        out.push_back(sw_up[v][static_cast<size_t>(sa)].up);
        int ra = gpu_root_index[static_cast<size_t>(a)], rb = gpu_root_index[static_cast<size_t>(b)];
        if (ra != rb) {
          if (roots.size() == 2) {
            out.push_back(ra < rb ? socket[v][0].up : socket[v][0].down);
          } else {
            out.push_back(socket[v][static_cast<size_t>(ra)].up);
            out.push_back(socket[v][static_cast<size_t>(rb)].down);
          }
        }
        out.push_back(sw_up[v][static_cast<size_t>(sb)].down);
      }
      out.push_back(gpu_link[v][static_cast<size_t>(b)].down);
      return;
    }
    case IntraKind::nvlink_mesh: {
      const auto& path = mesh_path[static_cast<size_t>(a)][static_cast<size_t>(b)];
      for (size_t i = 0; i + 1 < path.size(); ++i) {
        int x = path[i], y = path[i + 1];
        const DuplexLink& l = mesh[v].at({std::min(x, y), std::max(x, y)});
        out.push_back(x < y ? l.up : l.down);
      }
      return;
    }
  }
}

void Platform::Impl::fabric_route(int node_a, int nic_a, int node_b, int nic_b, std::vector<int>& out) const {
  const Network& net = topo->network;
  const int radix = net.leaf_radix > 0 ? net.leaf_radix : topo->nodes;
  if (net.kind == NetworkKind::fat_tree) {
    int la = node_a / radix, lb = node_b / radix;
    if (la != lb) {
      out.push_back(leaf_up[static_cast<size_t>(la)].up);
      out.push_back(leaf_up[static_cast<size_t>(lb)].down);
    }
  } else if (net.kind == NetworkKind::rail_optimized) {
    int ga = node_a / radix, gb = node_b / radix;
    if (ga != gb || nic_a != nic_b) {
      out.push_back(rail_up[static_cast<size_t>(ga)][static_cast<size_t>(nic_a)].up);
      out.push_back(rail_up[static_cast<size_t>(gb)][static_cast<size_t>(nic_b)].down);
    }
  }
}

void Platform::route(int src, int dst, std::vector<int>& out) const {
  const Impl& m = *impl_;
  const HostInfo& a = m.hosts.at(static_cast<size_t>(src));
  const HostInfo& b = m.hosts.at(static_cast<size_t>(dst));
  if (a.kind == HostKind::compute || b.kind == HostKind::compute)
    throw RuntimeError("simulator: the compute host is not on the network");
  if (a.node == b.node) {
    const auto v = static_cast<size_t>(a.node);
    if (a.kind == HostKind::gpu && b.kind == HostKind::gpu) {
      if (a.local != b.local) m.intra_route(a.node, a.local, b.local, out);
      return;
    }
    if (a.kind == HostKind::gpu && b.kind == HostKind::nvswitch) {
      out.push_back(m.gpu_link[v][static_cast<size_t>(a.local)].up);
      return;
    }
    if (a.kind == HostKind::nvswitch && b.kind == HostKind::gpu) {
      out.push_back(m.gpu_link[v][static_cast<size_t>(b.local)].down);
      return;
    }
    if (src == dst) return;
    throw RuntimeError("simulator: no route between these endpoints of one node");
  }
  // Across nodes: source NIC, fabric, destination NIC. A GPU uses the NIC that serves it.
  auto nic_of = [&](const HostInfo& h) -> int {
    if (h.kind == HostKind::channel) return h.local;
    if (h.kind != HostKind::gpu) throw RuntimeError("simulator: only GPUs and channels reach the network");
    return m.gpu_nic[static_cast<size_t>(h.local)];  // check_topology: every GPU has one on a multi-node platform
  };
  int na = nic_of(a), nb = nic_of(b);
  out.push_back(m.nic[static_cast<size_t>(a.node)][static_cast<size_t>(na)].up);
  m.fabric_route(a.node, na, b.node, nb, out);
  out.push_back(m.nic[static_cast<size_t>(b.node)][static_cast<size_t>(nb)].down);
}

std::vector<int> Platform::route_links(int src, int dst) const {
  std::vector<int> out;
  route(src, dst, out);
  return out;
}

const std::vector<double>& Platform::link_capacities() const { return impl_->capacities; }

const std::vector<std::string>& Platform::duplex_link_names() const { return impl_->duplex_names; }

}  // namespace dpsim::sim
