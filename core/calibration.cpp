// The calibration YAML format (read and written with yaml-cpp) and how a calibration overrides a
// scenario's constants. docs/validation.md describes the format.
#include "dpsim/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "dpsim/collective_algorithm.hpp"
#include "dpsim/cost.hpp"
#include "dpsim/error.hpp"
#include "dpsim/hash.hpp"
#include "dpsim/result.hpp"
#include "load_internal.hpp"
#include "yaml_node.hpp"

namespace dpsim {

namespace {

std::string num(double x) { return fmt::format("{}", x); }  // shortest text that reads back exactly

double number_or_zero(const YNode& map, const char* key) {
  const auto v = map.get(key);
  return v ? v->as_number() : 0.0;
}

// An efficiency: a fraction of the peak in (0, 1], or 0 for "not measured".
double efficiency_or_zero(const YNode& map, const char* key) {
  const double x = number_or_zero(map, key);
  if (x < 0 || x > 1)
    map.at(key).fail(fmt::format("must be a fraction of the peak from 0 to 1 (0 = not measured), got {}", x));
  return x;
}

Calibration from_node(const YNode& root) {
  root.require_map();
  root.allow_only({"calibration_version", "name", "source", "context", "peak_flops_per_s", "gemm_efficiency", "gemm",
                   "memory_bandwidth_bytes_per_s", "memory_efficiency", "optimizer_bytes_per_s", "overlap_slowdown",
                   "allreduce", "fits"});
  Calibration c;
  const YNode version = root.at("calibration_version");
  c.version = static_cast<int>(version.as_int(0, 1000));
  if (c.version != kCalibrationFormatVersion)
    version.fail(fmt::format("must be {} (is this a dpsim calibration file?)", kCalibrationFormatVersion));
  if (auto v = root.get("name")) c.name = v->as_string();
  if (auto v = root.get("source")) c.source = v->as_string();
  if (auto ctx = root.get("context")) {
    ctx->require_map();
    for (const auto& key : ctx->keys()) c.context[key] = ctx->at(key).as_string();
  }
  c.peak_flops_per_s = number_or_zero(root, "peak_flops_per_s");
  c.gemm_efficiency = efficiency_or_zero(root, "gemm_efficiency");
  c.memory_bandwidth_bytes_per_s = number_or_zero(root, "memory_bandwidth_bytes_per_s");
  c.memory_efficiency = efficiency_or_zero(root, "memory_efficiency");
  c.optimizer_bytes_per_s = number_or_zero(root, "optimizer_bytes_per_s");
  c.overlap_slowdown = number_or_zero(root, "overlap_slowdown");
  if (c.overlap_slowdown != 0 && !(c.overlap_slowdown >= 1))
    root.at("overlap_slowdown")
        .fail(fmt::format("must be a slowdown factor >= 1 (0 = not measured), got {}", c.overlap_slowdown));
  if (auto list = root.get("gemm")) {
    for (size_t i = 0; i < list->size(); ++i) {
      const YNode g = (*list)[i];
      g.allow_only({"m", "n", "k", "batch", "dtype", "seconds", "flops_per_s", "efficiency"});
      GemmCalibration x;
      x.m = g.at("m").as_int(0, int64_t{1} << 40);
      x.n = g.at("n").as_int(0, int64_t{1} << 40);
      x.k = g.at("k").as_int(0, int64_t{1} << 40);
      if (auto b = g.get("batch")) x.batch = std::max<int64_t>(1, b->as_int(0, int64_t{1} << 30));
      if (auto d = g.get("dtype")) x.dtype = d->as_string();
      x.seconds = number_or_zero(g, "seconds");
      x.flops_per_s = number_or_zero(g, "flops_per_s");
      x.efficiency = efficiency_or_zero(g, "efficiency");
      c.gemm.push_back(x);
    }
  }
  if (auto ar = root.get("allreduce")) {
    ar->allow_only({"world_size", "rows"});
    if (auto w = ar->get("world_size")) c.allreduce_world_size = static_cast<int>(w->as_int(0, 1 << 24));
    if (auto rows = ar->get("rows")) {
      for (size_t i = 0; i < rows->size(); ++i) {
        const YNode r = (*rows)[i];
        r.allow_only({"bytes", "time_s", "algbw_GBps", "busbw_GBps", "inplace_time_s", "inplace_algbw_GBps",
                      "inplace_busbw_GBps"});
        AllreduceRow x;
        x.bytes = r.at("bytes").as_number();
        x.time_s = r.at("time_s").as_number();
        x.algbw_GBps = number_or_zero(r, "algbw_GBps");
        x.busbw_GBps = number_or_zero(r, "busbw_GBps");
        x.inplace_time_s = number_or_zero(r, "inplace_time_s");
        x.inplace_algbw_GBps = number_or_zero(r, "inplace_algbw_GBps");
        x.inplace_busbw_GBps = number_or_zero(r, "inplace_busbw_GBps");
        if (x.bytes <= 0) r.at("bytes").fail("must be greater than 0");
        if (x.time_s < 0) r.at("time_s").fail("must not be negative");
        c.allreduce.push_back(x);
      }
    }
  }
  if (auto fits = root.get("fits")) {
    for (size_t i = 0; i < fits->size(); ++i) {
      const YNode f = (*fits)[i];
      f.allow_only({"fabric", "algorithm", "protocol", "world_size", "nodes", "latency_s", "busbw_bytes_per_s",
                    "link_bytes_per_s", "bandwidth_efficiency", "min_bytes", "max_bytes", "points",
                    "rms_relative_residual", "max_relative_residual", "loo_relative_error"});
      CollectiveFit x;
      x.fabric = f.at("fabric").as_enum<std::string>(
          {{"nvswitch", "nvswitch"}, {"pcie", "pcie"}, {"nvlink_mesh", "nvlink_mesh"}, {"net", "net"}, {"efa", "efa"}});
      if (auto a = f.get("algorithm")) x.algorithm = to_string(algorithm_value(*a, false));
      x.protocol = f.at("protocol").as_enum<std::string>({{"ll", "ll"}, {"ll128", "ll128"}, {"simple", "simple"}});
      x.world_size = static_cast<int>(f.at("world_size").as_int(2, 1 << 24));
      if (auto n = f.get("nodes")) x.nodes = static_cast<int>(n->as_int(1, 1 << 20));
      x.latency_s = f.at("latency_s").as_number();
      if (x.latency_s < 0) f.at("latency_s").fail(fmt::format("must not be negative, got {}", x.latency_s));
      x.busbw_bytes_per_s = f.at("busbw_bytes_per_s").as_positive_number();
      x.link_bytes_per_s = number_or_zero(f, "link_bytes_per_s");
      x.bandwidth_efficiency = efficiency_or_zero(f, "bandwidth_efficiency");
      x.min_bytes = number_or_zero(f, "min_bytes");
      x.max_bytes = number_or_zero(f, "max_bytes");
      if (auto p = f.get("points")) x.points = static_cast<int>(p->as_int(0, 1 << 24));
      x.rms_relative_residual = number_or_zero(f, "rms_relative_residual");
      x.max_relative_residual = number_or_zero(f, "max_relative_residual");
      x.loo_relative_error = number_or_zero(f, "loo_relative_error");
      c.fits.push_back(x);
    }
  }
  return c;
}

std::string emit(const Calibration& c, bool with_name) {
  YAML::Emitter out;
  out << YAML::Comment(
      "dpsim calibration (docs/validation.md). Units: SI (bytes, seconds, FLOP/s); GB/s columns are 1e9 B/s as "
      "nccl-tests prints them");
  out << YAML::Newline;
  out << YAML::BeginMap;
  out << YAML::Key << "calibration_version" << YAML::Value << c.version;
  if (with_name && !c.name.empty()) out << YAML::Key << "name" << YAML::Value << c.name;
  out << YAML::Key << "source" << YAML::Value << YAML::DoubleQuoted << c.source;
  out << YAML::Key << "context" << YAML::Value << YAML::BeginMap;
  for (const auto& [k, v] : c.context) out << YAML::Key << k << YAML::Value << YAML::DoubleQuoted << v;
  out << YAML::EndMap;
  out << YAML::Key << "peak_flops_per_s" << YAML::Value << num(c.peak_flops_per_s);
  out << YAML::Key << "gemm_efficiency" << YAML::Value << num(c.gemm_efficiency);
  out << YAML::Key << "gemm" << YAML::Value << YAML::BeginSeq;
  for (const auto& g : c.gemm) {
    out << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "m" << YAML::Value << g.m << YAML::Key << "n" << YAML::Value << g.n;
    out << YAML::Key << "k" << YAML::Value << g.k << YAML::Key << "batch" << YAML::Value << g.batch;
    out << YAML::Key << "dtype" << YAML::Value << g.dtype;
    out << YAML::Key << "seconds" << YAML::Value << num(g.seconds);
    out << YAML::Key << "flops_per_s" << YAML::Value << num(g.flops_per_s);
    out << YAML::Key << "efficiency" << YAML::Value << num(g.efficiency);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "memory_bandwidth_bytes_per_s" << YAML::Value << num(c.memory_bandwidth_bytes_per_s);
  out << YAML::Key << "memory_efficiency" << YAML::Value << num(c.memory_efficiency);
  out << YAML::Key << "optimizer_bytes_per_s" << YAML::Value << num(c.optimizer_bytes_per_s);
  out << YAML::Key << "overlap_slowdown" << YAML::Value << num(c.overlap_slowdown);
  out << YAML::Key << "allreduce" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "world_size" << YAML::Value << c.allreduce_world_size;
  out << YAML::Key << "rows" << YAML::Value << YAML::BeginSeq;
  for (const auto& r : c.allreduce) {
    out << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "bytes" << YAML::Value << num(r.bytes);
    out << YAML::Key << "time_s" << YAML::Value << num(r.time_s);
    out << YAML::Key << "algbw_GBps" << YAML::Value << num(r.algbw_GBps);
    out << YAML::Key << "busbw_GBps" << YAML::Value << num(r.busbw_GBps);
    out << YAML::Key << "inplace_time_s" << YAML::Value << num(r.inplace_time_s);
    out << YAML::Key << "inplace_algbw_GBps" << YAML::Value << num(r.inplace_algbw_GBps);
    out << YAML::Key << "inplace_busbw_GBps" << YAML::Value << num(r.inplace_busbw_GBps);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  if (!c.fits.empty()) {
    out << YAML::Key << "fits" << YAML::Value << YAML::BeginSeq;
    for (const auto& f : c.fits) {
      out << YAML::Flow << YAML::BeginMap;
      out << YAML::Key << "fabric" << YAML::Value << f.fabric;
      out << YAML::Key << "algorithm" << YAML::Value << f.algorithm;
      out << YAML::Key << "protocol" << YAML::Value << f.protocol;
      out << YAML::Key << "world_size" << YAML::Value << f.world_size;
      out << YAML::Key << "nodes" << YAML::Value << f.nodes;
      out << YAML::Key << "latency_s" << YAML::Value << num(f.latency_s);
      out << YAML::Key << "busbw_bytes_per_s" << YAML::Value << num(f.busbw_bytes_per_s);
      out << YAML::Key << "link_bytes_per_s" << YAML::Value << num(f.link_bytes_per_s);
      out << YAML::Key << "bandwidth_efficiency" << YAML::Value << num(f.bandwidth_efficiency);
      out << YAML::Key << "min_bytes" << YAML::Value << num(f.min_bytes);
      out << YAML::Key << "max_bytes" << YAML::Value << num(f.max_bytes);
      out << YAML::Key << "points" << YAML::Value << f.points;
      out << YAML::Key << "rms_relative_residual" << YAML::Value << num(f.rms_relative_residual);
      out << YAML::Key << "max_relative_residual" << YAML::Value << num(f.max_relative_residual);
      out << YAML::Key << "loo_relative_error" << YAML::Value << num(f.loo_relative_error);
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

YAML::Node load_text(const std::string& text, const std::string& file) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InputError(file, e.mark.line + 1, "", "not valid YAML: " + e.msg);
  }
}

std::string pointer_token(const std::string& key) {  // RFC 6901: "~" -> "~0", "/" -> "~1"
  std::string out;
  for (char c : key) out += c == '~' ? std::string("~0") : c == '/' ? std::string("~1") : std::string(1, c);
  return out;
}

// Aliases are shared nodes in yaml-cpp, but a JSON copy expands each: a "billion laughs" file of a few
// lines would expand to 10^18 values. No input dpsim reads as JSON holds a million values.
constexpr size_t kMaxJsonValues = 1000000;
struct JsonBudget {
  std::string file;
  size_t& left;
};

// `pointer` is the node's JSON pointer; `lines` (may be null) receives its 1-based line.
nlohmann::json to_json_node(const YAML::Node& node, const std::string& pointer, YamlLines* lines, JsonBudget budget) {
  if (budget.left-- == 0) {
    throw InputError(
        budget.file, node.Mark().line + 1, "",
        fmt::format("expands to more than {} values (YAML aliases repeated inside each other?)", kMaxJsonValues));
  }
  if (lines != nullptr && node.Mark().line >= 0) (*lines)[pointer] = node.Mark().line + 1;
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined: return nullptr;
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& item : node)
        out.push_back(to_json_node(item, pointer + "/" + std::to_string(out.size()), lines, budget));
      return out;
    }
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& kv : node) {
        const std::string& key = kv.first.Scalar();
        out[key] = to_json_node(kv.second, pointer + "/" + pointer_token(key), lines, budget);
      }
      return out;
    }
    case YAML::NodeType::Scalar: break;
  }
  const std::string& s = node.Scalar();
  if (node.Tag() == "!") return s;  // quoted: a string, whatever it looks like
  if (s == "true" || s == "True") return true;
  if (s == "false" || s == "False") return false;
  if (s == "~" || s == "null") return nullptr;
  if (!s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s[0] == '+' || s[0] == '.')) {
    try {
      size_t used = 0;
      const long long i = std::stoll(s, &used);
      if (used == s.size()) return i;
    } catch (const std::exception&) {
    }
    try {
      size_t used = 0;
      const double d = std::stod(s, &used);
      if (used == s.size() && std::isfinite(d)) return d;
    } catch (const std::exception&) {
    }
  }
  return s;
}

}  // namespace

Calibration parse_calibration_yaml(const std::string& text, const std::string& file) {
  const YAML::Node root = load_text(text, file);
  if (!root || root.IsNull()) throw InputError(file, 0, "", "the file is empty");
  if (!root.IsMap()) throw InputError(file, root.Mark().line + 1, "", "expected a mapping of keys at the top level");
  return from_node(YNode(root, file, ""));
}

Calibration read_calibration(const std::filesystem::path& file) {
  Calibration c = from_node(YNode::load_file(file));
  if (c.name.empty()) c.name = file.stem().string();
  return c;
}

std::string calibration_to_yaml(const Calibration& calibration) { return emit(calibration, true); }

void write_calibration(const std::filesystem::path& file, const Calibration& calibration) {
  write_file_atomic(file, calibration_to_yaml(calibration));
}

std::string calibration_hash(const Calibration& calibration) { return fnv1a64(emit(calibration, false)); }

nlohmann::json calibration_context(const Calibration& calibration) {
  return {{"name", calibration.name}, {"hash", calibration_hash(calibration)}, {"source", calibration.source}};
}

bool fit_is_applied(std::string_view algorithm, std::string_view protocol) {
  return std::any_of(kAppliedFits.begin(), kAppliedFits.end(),
                     [&](const FitKind& k) { return k.algorithm == algorithm && k.protocol == protocol; });
}

std::string applied_fits_text() {
  std::string out;
  for (const auto& k : kAppliedFits) {
    if (!out.empty()) out += ", ";
    out += k.algorithm == "ring" ? std::string(k.protocol) : fmt::format("{}/{}", k.protocol, k.algorithm);
    if (k.algorithm == "ring" && k.protocol == "simple") out += " (= simple/ring)";
  }
  return out;
}

double fit_ceiling_bytes_per_s(const CollectiveFit& f) {
  if (f.algorithm != "nvls" || f.world_size < 2) return f.link_bytes_per_s;
  const double n = f.world_size;
  return f.link_bytes_per_s * 2.0 * (n - 1) / n;
}

std::optional<std::string> fit_inapplicable(const CollectiveFit& f) {
  if (!fit_is_applied(f.algorithm, f.protocol))
    return fmt::format("dpsim applies {} fits only; a {}/{} fit has nothing to set", applied_fits_text(), f.protocol,
                       f.algorithm);
  if (f.world_size < 2) return std::string("fitted on fewer than 2 ranks");
  const double ceiling = fit_ceiling_bytes_per_s(f);
  if (ceiling > 0 && f.busbw_bytes_per_s > ceiling * (1 + 1e-9))
    return fmt::format("busbw {:.1f} GB/s is above the {} ceiling {:.1f} GB/s at nominal bandwidth",
                       f.busbw_bytes_per_s / 1e9, f.algorithm, ceiling / 1e9);
  return std::nullopt;
}

std::string CalibrationReport::summary() const {
  std::string out = fmt::format("calibration {}: applied ", name);
  for (size_t i = 0; i < applied.size(); ++i) out += (i ? ", " : "") + applied[i];
  if (applied.empty()) out += "nothing";
  if (!not_applied.empty()) {
    out += "; not applied: ";
    for (size_t i = 0; i < not_applied.size(); ++i)
      out += fmt::format("{}{} ({})", i ? ", " : "", not_applied[i].entry, not_applied[i].reason);
  }
  return out;
}

nlohmann::json CalibrationReport::to_json(const Calibration& c) const {
  nlohmann::json out = calibration_context(c);
  out["applied"] = applied;
  out["not_applied"] = nlohmann::json::array();
  for (const auto& n : not_applied) out["not_applied"].push_back({{"entry", n.entry}, {"reason", n.reason}});
  return out;
}

namespace {

std::string fit_entry(const CollectiveFit& f) {
  return fmt::format("{}/{} on {} ({} ranks{})", f.protocol, f.algorithm, f.fabric, f.world_size,
                     f.nodes > 1 ? fmt::format(", {} nodes", f.nodes) : std::string());
}

// Why this scenario has no place for the fit (nullopt: it has).
std::optional<std::string> fit_mismatch(const Scenario& s, const CollectiveFit& f) {
  const std::string intra = to_string(s.topology.intra.kind);
  const std::string net = s.topology.network.ring_class();
  if (f.fabric == intra || (f.fabric == net && s.topology.nodes > 1)) {
    if (f.algorithm == "nvls" &&
        !algorithm_available(Algorithm::nvls, CollectiveKind::all_reduce, summarize_fabric(s.topology), s.nccl))
      return fmt::format("dpsim runs no NVLS on this topology ({} node{} x {} GPUs)", s.topology.nodes,
                         s.topology.nodes == 1 ? "" : "s", s.topology.gpus_per_node);
    return std::nullopt;
  }
  return fmt::format("fitted on {}; this topology has {} in a node{}", f.fabric, intra,
                     s.topology.nodes > 1 ? fmt::format(" and {} between nodes", net) : std::string());
}

// The `row` hop latency (on `fabric`, protocol p) at which the ring's modelled latency is target_s; -1 where the ring's
// latency does not depend on it.
double solve_ring_hop(NcclModel nccl, const FabricSummary& f, Fabric fabric, Algorithm row, Protocol p,
                      double target_s) {
  const AlgorithmDescriptor& ring = algorithm_descriptor(Algorithm::ring);
  const auto latency_at = [&](double hop_s) {
    nccl.set_hw_latency(fabric, row, p, hop_s);
    return ring.cost(CollectiveKind::all_reduce, 1 << 20, p, f, nccl).latency_s;
  };
  const double probe_s = 1e-6;
  const double at0 = latency_at(0), per_s = (latency_at(probe_s) - at0) / probe_s;
  return per_s > 0 ? (target_s - at0) / per_s : -1;
}

void apply_fit(Scenario& s, const CollectiveFit& f) {
  const std::string intra = to_string(s.topology.intra.kind);
  const bool inter = f.fabric == s.topology.network.ring_class();
  const Protocol p = f.protocol == "ll" ? Protocol::ll : f.protocol == "ll128" ? Protocol::ll128 : Protocol::simple;
  const Fabric fabric = inter ? Fabric::net : f.fabric == "pcie" ? Fabric::pcie : Fabric::nvlink;
  auto set = [&s, p](Fabric on, Algorithm a, double x) { s.nccl.set_hw_latency(on, a, p, std::max(0.0, x)); };
  if (f.algorithm == "nvls") {
    // NVLS algbw = busbw * n / (2(n-1)) is flat in the GPU count (data/nccl.yaml).
    const double n = f.world_size;
    if (f.link_bytes_per_s > 0)
      s.nccl.nvls_algbw_per_link = f.busbw_bytes_per_s * n / (2.0 * (n - 1)) / f.link_bytes_per_s /
                                   s.nccl.nvls_efficiency_vs_hopper(s.topology.gpu.arch);  // stored as Hopper's
    set(Fabric::nvlink, Algorithm::nvls, f.latency_s);
    return;
  }
  if (p == Protocol::simple && f.bandwidth_efficiency > 0) s.nccl.set_ring_efficiency(f.fabric, f.bandwidth_efficiency);
  // The ring's latency is affine in the per-hop latency being fitted: solve the model's own formula (core/algorithms/
  // ring.cpp) for the hop that reproduces the fitted latency on the fit's node and GPU counts. With one GPU per node
  // NCCL prices the network step with the tree's row (tuning.cc), so that row is the one fitted.
  FabricSummary sized = summarize_fabric(s.topology);
  sized.nodes = f.nodes;
  sized.world = f.world_size;
  sized.gpus_per_node = std::max(1, f.world_size / std::max(1, f.nodes));
  const Algorithm row = inter && sized.gpus_per_node == 1 ? Algorithm::tree : Algorithm::ring;
  const double hop = solve_ring_hop(s.nccl, sized, fabric, row, p, f.latency_s);
  if (hop >= 0) set(fabric, row, hop);
}

CalibrationReport apply_entries(Scenario& s, const Calibration& c) {
  CalibrationReport report;
  report.name = c.name.empty() ? "(unnamed)" : c.name;
  report.hash = calibration_hash(c);
  if (c.gemm_efficiency > 0) {
    s.topology.gpu.gemm_efficiency = c.gemm_efficiency;
    report.applied.push_back(fmt::format("gemm_efficiency {:.3f}", c.gemm_efficiency));
  }
  const std::string dtype = to_string(s.training.compute());  // the GEMMs' dtype (autocast: not the weights')
  std::map<std::string, int> other_dtypes;
  int shapes = 0;
  for (const auto& g : c.gemm) {  // per-shape efficiencies measured in the scenario's dtype
    if (g.efficiency <= 0) continue;
    if (g.dtype != dtype) {
      ++other_dtypes[g.dtype];
      continue;
    }
    s.topology.gpu.gemm_efficiency_by_shape[{g.m, g.n, g.k, g.batch}] = g.efficiency;
    ++shapes;
  }
  if (shapes > 0) report.applied.push_back(fmt::format("{} GEMM shape{} ({})", shapes, shapes == 1 ? "" : "s", dtype));
  for (const auto& [other, count] : other_dtypes)
    report.not_applied.push_back({fmt::format("{} GEMM shape{} ({})", count, count == 1 ? "" : "s", other),
                                  fmt::format("the scenario trains in {}", dtype)});
  if (c.memory_efficiency > 0) {
    s.topology.gpu.memory_efficiency = c.memory_efficiency;
    report.applied.push_back(fmt::format("memory_efficiency {:.3f}", c.memory_efficiency));
  }
  if (c.overlap_slowdown > 0) {
    s.nccl.set_overlap_slowdown_everywhere(c.overlap_slowdown);
    report.applied.push_back(fmt::format("overlap_slowdown {:.3f}", c.overlap_slowdown));
  }
  for (const auto& f : c.fits) {
    std::optional<std::string> why = fit_inapplicable(f);
    if (!why) why = fit_mismatch(s, f);
    if (why) {
      report.not_applied.push_back({fit_entry(f), *why});
      continue;
    }
    apply_fit(s, f);
    report.applied.push_back(fit_entry(f));
  }
  if (!c.name.empty() || !c.fits.empty() || c.gemm_efficiency > 0 || c.overlap_slowdown > 0)
    s.nccl.version += fmt::format(" + calibration {} {}", report.name, report.hash);
  return report;
}

}  // namespace

CalibrationReport apply_calibration(Scenario& s, const Calibration& c) {
  const auto gpu = c.context.find("gpu");
  if (gpu == c.context.end() || gpu->second == s.topology.gpu.name) return apply_entries(s, c);
  // Measured on another GPU: another machine's numbers. Nothing applies; each entry says so.
  Scenario scratch = s;
  CalibrationReport report = apply_entries(scratch, c);
  const std::string why = fmt::format("measured on {}; this scenario runs {}", gpu->second, s.topology.gpu.name);
  std::vector<CalibrationReport::NotApplied> other_gpu;
  for (const auto& entry : report.applied) other_gpu.push_back({entry, why});
  report.not_applied.insert(report.not_applied.begin(), other_gpu.begin(), other_gpu.end());
  report.applied.clear();
  s.nccl.version = scratch.nccl.version;  // the calibration's identity is recorded all the same
  return report;
}

nlohmann::json read_yaml_as_json(const std::filesystem::path& file, YamlLines* lines) {
  size_t budget = kMaxJsonValues;
  return to_json_node(load_yaml_file(file), "", lines, {file.string(), budget});
}

}  // namespace dpsim
