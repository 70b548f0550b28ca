#include "terms.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace dpsim::algorithms {

Fabric intra_fabric(const FabricSummary& f) { return f.intra_class == "pcie" ? Fabric::pcie : Fabric::nvlink; }

double base_latency(const NcclModel& nccl, Algorithm a, Protocol p) {
  const auto it = nccl.base_latency_s.find(a);
  return it == nccl.base_latency_s.end() ? 0.0 : std::max(0.0, it->second.get(p));
}

double intra_link_busbw(const FabricSummary& f, const NcclModel& nccl) {
  return f.intra_ring_bytes_per_s * nccl.ring_efficiency_for(f.intra_class, f.arch);
}

double intra_ring_busbw(const FabricSummary& f, const NcclModel& nccl) {
  const double p2p = intra_link_busbw(f, nccl);
  if (f.intra_shm_edges == 0) return p2p;
  const double shm = shm_busbw(f, nccl);  // PCIe hops through host memory (NCCL's SHM)
  return f.intra_shm_edges == f.intra_ring_edges ? shm : std::min(p2p, shm);
}

double inter_ring_busbw(const FabricSummary& f, const NcclModel& nccl) {
  return f.inter_ring_bytes_per_s * nccl.ring_efficiency_for(f.net_class, f.arch);
}

double ring_busbw(const FabricSummary& f, const NcclModel& nccl) {
  const double intra = intra_ring_busbw(f, nccl);
  if (f.nodes == 1) return intra;
  return std::min(intra, inter_ring_busbw(f, nccl));
}

double ll_max_busbw(const FabricSummary& f, const NcclModel& nccl) {
  if (f.nodes == 1) {
    const auto cap = nccl.ll_max_busbw_bytes_per_s.find(f.arch);
    return cap == nccl.ll_max_busbw_bytes_per_s.end() ? std::numeric_limits<double>::infinity() : cap->second;
  }
  const auto row = nccl.ll_max_busbw_multi_node_bytes_per_s.find(nccl_table_vendor(f.cpu_vendor));
  if (row == nccl.ll_max_busbw_multi_node_bytes_per_s.end()) return std::numeric_limits<double>::infinity();
  return row->second[f.nodes == 2 ? 0 : 1];
}

double protocol_busbw(double busbw, Protocol p, const FabricSummary& f, const NcclModel& nccl) {
  const double bw = busbw * nccl.protocol_efficiency.get(p);
  return p == Protocol::ll ? std::min(bw, ll_max_busbw(f, nccl)) : bw;
}

double ll_call_busbw(double busbw, double bytes, const FabricSummary& f, const NcclModel& nccl) {
  const NcclModel::LlCallChannels& c = nccl.ll_call_channels;
  const auto per_channel = c.channel_busbw_bytes_per_s.find(f.arch);
  if (per_channel == c.channel_busbw_bytes_per_s.end()) return busbw;
  // NCCL v2.30.7-1 src/enqueue.cc:2070-2106 (topoGetAlgoInfo): channels dropped while bytes < nc * nt * threshold,
  // then threads halved (down to 64) while it still holds; the ring/LL threshold is 8 B x nRanks (tuning.cc:593).
  const double threshold = c.thread_threshold_bytes * f.world;
  int threads = c.max_threads;
  const double fit = std::floor(bytes / (threads * threshold));
  const int channels = static_cast<int>(std::clamp(fit, 1.0, static_cast<double>(c.max_channels)));
  while (bytes < channels * threads * threshold && threads / 2 >= c.min_threads) threads /= 2;
  const double call_busbw = channels * per_channel->second * threads / c.max_threads;
  return std::min(busbw, call_busbw);
}

namespace {

// Rank r in NCCL's binary tree over n ranks (trees.cc ncclGetBtree): the root 0 has one child, its lowest power of
// two >= n halved; another rank with lowest set bit b has the parent (r ^ b) | 2b, or r ^ b where that is out of
// range, and up to two children, r - b/2 and r + b/2, the second's offset halved until it is in range.
struct BtreeNode {
  int parent = -1;
  int children = 0;
};
BtreeNode btree_node(int n, int r) {
  int bit = 1;
  while (bit < n && !(bit & r)) bit <<= 1;
  if (r == 0) return {-1, n > 1 ? 1 : 0};
  BtreeNode node;
  const int up = (r ^ bit) | (bit << 1);
  node.parent = up < n ? up : (r ^ bit);
  int low = bit >> 1;
  if (low == 0) return node;
  node.children = 1;  // r - low is always in range
  while (low > 0 && r + low >= n) low >>= 1;
  node.children += low > 0 ? 1 : 0;
  return node;
}

// The double tree's second tree (ncclGetDtree) numbers the ranks anew: mirrored (r -> n-1-r) on an even count,
// shifted by one (r -> r-1) on an odd one; `from_second` maps back.
int to_second(int n, int r) { return n % 2 == 1 ? (r - 1 + n) % n : n - 1 - r; }
int from_second(int n, int r) { return n % 2 == 1 ? (r + 1) % n : n - 1 - r; }

// Rank v's parent in tree 0 or 1 of NCCL's double tree; -1 at a root.
int dtree_parent(int n, int v, int tree) {
  if (tree == 0) return btree_node(n, v).parent;
  const int u = btree_node(n, to_second(n, v)).parent;
  return u < 0 ? -1 : from_second(n, u);
}

int links(const BtreeNode& b) { return (b.parent >= 0 ? 1 : 0) + b.children; }

}  // namespace

double tree_node_network_bytes(int nodes) {
  // A node is interior in at most one of the two trees (parent and two children: 3 halves) and a leaf of the other
  // (its parent: 1 half), so no node sends more than 2: the search stops there.
  const double most = 2.0;
  double worst = 0;
  for (int r = 0; r < nodes && worst < most; ++r)
    worst = std::max(worst, 0.5 * (links(btree_node(nodes, r)) + links(btree_node(nodes, to_second(nodes, r)))));
  return worst;
}

double tree_network_relief(const FabricSummary& f) {
  if (f.nodes < 2) return 1.0;
  return ring_bytes_sent_per_gpu(1.0, f.world) / tree_node_network_bytes(f.nodes);
}

double tree_busbw(Protocol p, double bytes, const FabricSummary& f, const NcclModel& nccl, TreeView view) {
  double busbw = intra_ring_busbw(f, nccl);
  if (view == TreeView::nccl_tuner) {
    // NCCL's model: the ring's graph bandwidth (no relief), x0.92, then LL x1/3.8 (capped) or LL128 x120/128
    if (f.nodes > 1) busbw = std::min(busbw, inter_ring_busbw(f, nccl));
    busbw *= nccl.tree_bandwidth_factor * nccl.tree_protocol_efficiency.get(p);
    if (p == Protocol::ll) busbw = std::min(busbw, ll_max_busbw(f, nccl));
  } else {
    // The wire: the network relieved on two nodes, each protocol's share as on the ring (LL's flags, LL128's lines)
    if (f.nodes > 1) busbw = std::min(busbw, inter_ring_busbw(f, nccl) * tree_network_relief(f));
    busbw = protocol_busbw(busbw, p, f, nccl);
  }
  return busbw * tree_correction(nccl, Algorithm::tree, p, bytes);
}

double inter_hop_latency(Algorithm a, Protocol p, const FabricSummary& f, const NcclModel& nccl) {
  // With one GPU per node NCCL prices every algorithm's network step at the tree's (tuning.cc:386-388); the
  // plugin's latency is paid once more by Simple for its flush (tuning.cc:389-391).
  const Algorithm row = f.gpus_per_node == 1 ? Algorithm::tree : a;
  const auto net = nccl.hw_latency(Fabric::net, row, f.arch);
  if (!net || net->get(p) < 0) return -1;
  const double plugin = nccl.net_plugin_latency(f.net_class) * (p == Protocol::simple ? 2 : 1);
  return net->get(p) + plugin + edge_excess_latency(f, nccl, true);
}

int log2_floor(int n) {
  int k = 0;
  while (n > 1) {
    n >>= 1;
    ++k;
  }
  return k;
}

double halved_chunk(double chunk, double channel_bytes, double depth,
                    const std::vector<NcclStepChunks::Halving>& rules) {
  if (chunk <= 0) return 0;
  for (const NcclStepChunks::Halving& h : rules)
    while (std::floor(channel_bytes / chunk) < depth * h.steps && chunk > h.above_bytes) chunk /= 2;
  return chunk;
}

double tree_chunk_bytes(double channel_bytes, Protocol p, int nodes, int gpus_per_node, const NcclStepChunks& k) {
  const double chunk = k.tree_bytes.get(p);
  if (p != Protocol::ll128) return std::max(0.0, chunk);
  // enqueue.cc:2286-2294: nstepsLL128 = 1 + log2i(nNodes) + 0.1 ppn, the rules' steps per GPU of the node
  const double ppn = gpus_per_node;
  const double nsteps = 1 + log2_floor(nodes) + k.tree_ll128_steps_per_gpu * ppn;
  return halved_chunk(chunk, channel_bytes, nsteps / ppn, k.tree_ll128_halving);
}

double tree_correction(const NcclModel& nccl, Algorithm a, Protocol p, double bytes) {
  const auto it = nccl.tree_correction.find(p);
  const auto entries = nccl.tree_correction_entries.find(a);
  if (it == nccl.tree_correction.end() || entries == nccl.tree_correction_entries.end() || bytes < 64) return 1.0;
  const auto index = static_cast<size_t>(std::floor(std::log2(bytes / 64.0)));
  return index < std::min(it->second.size(), static_cast<size_t>(entries->second)) ? it->second[index] : 1.0;
}

bool nvlstree_corrected(const FabricSummary& f, const NcclModel& nccl) {
  const auto& archs = nccl.nvlstree_correction_archs;
  return f.cpu_vendor != CpuVendor::arm && std::find(archs.begin(), archs.end(), f.arch) != archs.end();
}

int steps_of_chunks(double bytes, double chunk) {
  if (!(chunk > 0)) return 1;
  return static_cast<int>(std::max(1.0, std::min(std::ceil(bytes / chunk), 1e9)));
}

std::string nvls_domain_unavailable(const FabricSummary& f, const NcclModel& nccl) {
  if (!f.nvls) return "the topology's GPUs have no NVLink SHARP (an NVSwitch with intra_node.nvls: true)";
  if (f.gpus_per_node < nccl.nvls_min_gpus)
    return fmt::format(
        "{} GPUs per node: dpsim runs NVLS with {} or more in the NVSwitch domain (data/nccl.yaml nvls_min_gpus; "
        "with fewer it is no faster than the ring)",
        f.gpus_per_node, nccl.nvls_min_gpus);
  return {};
}

AlgorithmCost nvls_call(double latency_s, double algbw, double bytes, const PipelineFill& nvls_fill) {
  const double fill = nvls_fill.seconds(bytes);
  return {true, latency_s, latency_s + fill + bytes / algbw, fill};
}

double nvls_intra_algbw(const FabricSummary& f, const NcclModel& nccl) {
  return f.intra_ring_bytes_per_s * nccl.nvls_algbw_per_link * nccl.nvls_efficiency_vs_hopper(f.arch);
}

std::vector<Flow> nvls_flows(const FlowSpace& p, CollectiveKind) {
  std::vector<Flow> out;
  for (int v = 0; v < p.simulated_nodes(); ++v)
    for (int x = 0; x < p.gpus_per_node(); ++x) {
      out.push_back({p.gpu(v, x), p.nvswitch(v), 1.0});
      out.push_back({p.nvswitch(v), p.gpu(v, x), 1.0});
    }
  append_inter_node_double_tree(p, out);
  return out;
}

int nvls_steps(const FlowSpace& p, const StepCall& call, double chunk, const std::vector<NcclStepChunks::Cap>& caps,
               const NcclModel& nccl) {
  if (!(chunk > 0)) return 1;
  const int heads = p.gpus_per_node();  // graph/connect.cc:261: every GPU of the node is a head
  const double channel_bytes = call.bytes / nccl.step_chunks.nvls_channels_for(call.arch, p.nodes() > 1);
  chunk = capped_nvls_chunk(chunk, channel_bytes, heads, caps);
  return steps_of_chunks(channel_bytes, heads * chunk);  // enqueue.cc:2361-2362: nLoops, one step each
}

double capped_nvls_chunk(double chunk, double channel_bytes, int heads, const std::vector<NcclStepChunks::Cap>& caps) {
  for (const NcclStepChunks::Cap& cap : caps)
    if (channel_bytes < cap.loops * heads * chunk && chunk > cap.bytes) chunk = cap.bytes;
  return chunk;
}

double nvlstree_chunk_bytes(double channel_bytes, int nodes, int heads, const NcclStepChunks& k) {
  if (!(k.nvls_bytes > 0)) return 0;
  const double chunk = nodes >= k.nvlstree_max_from_nodes ? std::min(k.nvls_bytes, k.nvlstree_max_bytes) : k.nvls_bytes;
  return capped_nvls_chunk(chunk, channel_bytes, heads, k.nvlstree_caps);
}

int nvlstree_heads(const FabricSummary& f, int max_heads) {
  int heads = f.nics_per_node > 0 ? std::min(f.gpus_per_node, f.nics_per_node) : f.gpus_per_node;
  if (max_heads > 0) heads = std::min(heads, max_heads);
  return std::max(1, heads);
}

void append_intra_node_chain(const FlowSpace& p, std::vector<Flow>& out) {
  for (int v = 0; v < p.simulated_nodes(); ++v)
    for (int x = 0; x + 1 < p.gpus_per_node(); ++x) {
      out.push_back({p.gpu(v, x), p.gpu(v, x + 1), 1.0});
      out.push_back({p.gpu(v, x + 1), p.gpu(v, x), 1.0});
    }
}

void append_inter_node_double_tree(const FlowSpace& p, std::vector<Flow>& out) {
  const int n = p.nodes();
  if (n < 2) return;
  const double half = 0.5 * p.channel_share();
  for (int tree = 0; tree < 2; ++tree)
    for (int v = 0; v < n; ++v) {
      const int u = dtree_parent(n, v, tree);
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
