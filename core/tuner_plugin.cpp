// NCCL tuner plugins: data/tuner_plugins.yaml read once, and the region lookup (the file says whose rules it follows).
#include "dpsim/tuner_plugin.hpp"
#include "dpsim/input_file.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "dpsim/load.hpp"
#include "load_internal.hpp"
#include "yaml_node.hpp"

namespace dpsim {

namespace {

using Plugins = std::map<std::string, std::shared_ptr<const TunerPlugin>>;

TunerPoint read_point(const YNode& n) {
  if (!n.is_sequence() || n.size() != 2) n.fail("expected [bytes, ranks]");
  return {n[0].as_number(), n[1].as_number()};
}

// Where the line through a and b leaves the box [0, max]: the plugin's extend_region(a, b, max).
TunerPoint extend_to_box(const TunerPoint& a, const TunerPoint& b, const TunerPoint& max) {
  if (a.bytes == b.bytes) return {a.bytes, max.ranks};
  if (a.ranks == b.ranks) return {max.bytes, a.ranks};
  const double slope = (a.ranks - b.ranks) / (a.bytes - b.bytes);
  const double at_zero = b.ranks - slope * b.bytes;
  const double ranks_at_max = slope * max.bytes + at_zero;
  if (ranks_at_max < max.ranks) return {max.bytes, ranks_at_max};
  return {(max.ranks - at_zero) / slope, max.ranks};
}

// A coordinate: a number, or "name.x" / "name.y" of an extended point.
double read_coordinate(const YNode& n, const std::map<std::string, TunerPoint>& extended) {
  const std::string text = n.as_string();
  const auto dot = text.rfind('.');
  if (dot != std::string::npos && extended.count(text.substr(0, dot))) {
    const TunerPoint& p = extended.at(text.substr(0, dot));
    const std::string axis = text.substr(dot + 1);
    if (axis == "x") return p.bytes;
    if (axis == "y") return p.ranks;
  }
  return n.as_number();
}

TunerPoint read_vertex(const YNode& n, const std::map<std::string, TunerPoint>& extended) {
  if (n.is_scalar()) {
    const auto it = extended.find(n.as_string());
    if (it == extended.end()) n.fail(fmt::format("\"{}\" is not a point of `extended`", n.as_string()));
    return it->second;
  }
  if (!n.is_sequence() || n.size() != 2) n.fail("expected [bytes, ranks] or the name of an extended point");
  return {read_coordinate(n[0], extended), read_coordinate(n[1], extended)};
}

TunerRegion read_region(const YNode& n, const std::map<std::string, TunerPoint>& extended) {
  n.allow_only({"algorithm", "protocol", "vertices"});
  TunerRegion r;
  r.algorithm = algorithm_value(n.at("algorithm"), false);
  r.protocol = n.at("protocol")
                   .as_enum<Protocol>({{"ll", Protocol::ll}, {"ll128", Protocol::ll128}, {"simple", Protocol::simple}});
  const YNode v = n.at("vertices");
  if (!v.is_sequence() || v.size() < 2) v.fail("a region needs at least 2 vertices");
  for (size_t i = 0; i < v.size(); ++i) r.vertices.push_back(read_vertex(v[i], extended));
  return r;
}

std::shared_ptr<const TunerPlugin> read_plugin(const std::string& name, const YNode& n) {
  n.allow_only({"source", "max_size", "max_ranks", "min_nodes", "gpus_per_node", "extended", "all_reduce"});
  auto p = std::make_shared<TunerPlugin>();
  p->name = name;
  p->source = n.at("source").as_string();
  p->max = {n.at("max_size").as_positive_number(), n.at("max_ranks").as_positive_number()};
  p->min_nodes = static_cast<int>(n.at("min_nodes").as_int(1, 1 << 20));
  p->gpus_per_node = static_cast<int>(n.at("gpus_per_node").as_int(1, 1024));
  std::map<std::string, TunerPoint> extended;
  if (auto e = n.get("extended"))
    for (const auto& key : e->keys()) {
      const YNode line = e->at(key);
      if (!line.is_sequence() || line.size() != 2) line.fail("expected [a, b]: two points the line runs through");
      extended[key] = extend_to_box(read_point(line[0]), read_point(line[1]), p->max);
    }
  const YNode all_reduce = n.at("all_reduce");
  for (size_t i = 0; i < all_reduce.size(); ++i)
    p->regions[CollectiveKind::all_reduce].push_back(read_region(all_reduce[i], extended));
  return p;
}

const Plugins& plugins() {
  static const ReadOnce<Plugins> all([] {
    const YNode root = YNode::load_file(data_root() / "data" / "tuner_plugins.yaml");
    root.allow_only({"tuner_plugins"});
    const YNode list = root.at("tuner_plugins");
    Plugins out;
    for (const auto& key : list.keys()) out[key] = read_plugin(key, list.at(key));
    return out;
  });
  return all.get();
}

double cross(const TunerPoint& o, const TunerPoint& a, const TunerPoint& b) {
  return (a.bytes - o.bytes) * (b.ranks - o.ranks) - (a.ranks - o.ranks) * (b.bytes - o.bytes);
}

bool on_segment(const TunerPoint& p, const TunerPoint& a, const TunerPoint& b) {
  if (cross(a, b, p) != 0) return false;
  return p.bytes >= std::min(a.bytes, b.bytes) && p.bytes <= std::max(a.bytes, b.bytes) &&
         p.ranks >= std::min(a.ranks, b.ranks) && p.ranks <= std::max(a.ranks, b.ranks);
}

// Whether segments p-q and a-b cross at one point inside both.
bool crosses(const TunerPoint& p, const TunerPoint& q, const TunerPoint& a, const TunerPoint& b) {
  const double d1 = cross(p, q, a), d2 = cross(p, q, b), d3 = cross(a, b, p), d4 = cross(a, b, q);
  return ((d1 > 0) != (d2 > 0)) && d1 != 0 && d2 != 0 && ((d3 > 0) != (d4 > 0)) && d3 != 0 && d4 != 0;
}

}  // namespace

std::shared_ptr<const TunerPlugin> find_tuner_plugin(const std::string& name) {
  const Plugins& all = plugins();
  const auto it = all.find(name);
  return it == all.end() ? nullptr : it->second;
}

std::vector<std::string> tuner_plugin_names() {
  std::vector<std::string> names;
  for (const auto& [name, plugin] : plugins()) names.push_back(name);
  return names;
}

// On an edge counts as inside; otherwise the crossings of the ray towards twice the plugin's far corner (the
// plugin casts the same ray) decide.
bool in_tuner_region(const TunerPoint& p, const TunerRegion& region, const TunerPoint& max) {
  const auto& v = region.vertices;
  for (size_t i = 0; i < v.size(); ++i)
    if (on_segment(p, v[i], v[(i + 1) % v.size()])) return true;
  const TunerPoint far{2 * max.bytes, 2 * max.ranks};
  int crossings = 0;
  for (size_t i = 0; i < v.size(); ++i) crossings += crosses(p, far, v[i], v[(i + 1) % v.size()]) ? 1 : 0;
  return crossings % 2 == 1;
}

std::optional<TunerChoice> tuner_plugin_choice(const TunerPlugin& plugin, CollectiveKind kind, double bytes, int nodes,
                                               int gpus_per_node, bool nvls) {
  if (nodes < plugin.min_nodes || gpus_per_node != plugin.gpus_per_node) return std::nullopt;
  const auto it = plugin.regions.find(kind);
  if (it == plugin.regions.end()) return std::nullopt;
  const TunerPoint p{bytes, static_cast<double>(nodes) * gpus_per_node};
  for (const TunerRegion& r : it->second) {
    if (r.algorithm == Algorithm::nvlstree && !nvls) continue;
    if (in_tuner_region(p, r, plugin.max)) return TunerChoice{r.algorithm, r.protocol};
  }
  return std::nullopt;
}

}  // namespace dpsim
