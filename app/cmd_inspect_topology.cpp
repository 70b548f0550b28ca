// dpsim inspect topology NAME: the fabric dpsim sees in a topology and the NCCL all-reduce it predicts at each
// message size, printed the way nccl-tests' all_reduce_perf prints a sweep (time per call, algbw, busbw).
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "dpsim/cost.hpp"
#include "dpsim/error.hpp"
#include "dpsim/load.hpp"
#include "dpsim/units.hpp"
#include "tables.hpp"

namespace dpsim::app {

namespace {

struct TopologyArgs {
  std::string topology;
  int nodes = 0;          // 0: the topology's
  int gpus_per_node = 0;  // 0: the topology's
  std::string min_bytes = "8B";
  std::string max_bytes = "8GiB";
  std::string algorithm = "auto";
  bool json = false;
};

Algorithm parse_algorithm(const std::string& a) {
  return a == "ring"   ? Algorithm::ring
         : a == "tree" ? Algorithm::tree
         : a == "nvls" ? Algorithm::nvls
                       : Algorithm::automatic;
}

// nccl-tests' sizes are powers of two: label them in binary units (1MiB), other sizes in bytes.
std::string size_label(double bytes) {
  for (const auto& [unit, scale] : {std::pair{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}) {
    const double v = bytes / scale;
    if (v >= 1 && v == std::floor(v)) return fmt::format("{:.0f}{}", v, unit);
  }
  return fmt::format("{:.0f}B", bytes);
}

double size_option(const std::string& text, const char* option) {
  try {
    const double b = parse_bytes(text);
    if (b >= 1 && b <= 1e15) return b;
  } catch (const std::exception&) {
  }
  throw InputError(fmt::format("{}: \"{}\" is not a message size from 1B to 1PB (e.g. 8B, 1MiB, 8GiB)", option, text));
}

void run(const TopologyArgs& a) {
  const std::filesystem::path file = resolve_topology(a.topology, std::filesystem::current_path());
  std::error_code ec;
  const bool is_path = a.topology.find('/') != std::string::npos || a.topology.ends_with(".yaml");
  if (!is_path && !std::filesystem::exists(file, ec))
    throw InputError(
        fmt::format("inspect topology: no topology named \"{}\" (shipped: {})", a.topology, shipped_topologies()));
  Topology t = load_topology(file);
  t = sized_topology(t, a.nodes > 0 ? a.nodes : t.nodes, a.gpus_per_node > 0 ? a.gpus_per_node : t.gpus_per_node,
                     "inspect topology (--nodes, --gpus-per-node)");
  const double lo = size_option(a.min_bytes, "--min-bytes"), hi = size_option(a.max_bytes, "--max-bytes");
  if (hi < lo) throw InputError("inspect topology: --max-bytes is smaller than --min-bytes");
  const NcclModel nccl = load_nccl(data_root() / "data" / "nccl.yaml");
  const FabricSummary f = summarize_fabric(t);
  const Collective want{parse_algorithm(a.algorithm), Protocol::automatic};
  nlohmann::json rows = nlohmann::json::array();
  std::vector<std::vector<std::string>> table{
      {"size", "bytes", "algorithm", "time (us)", "algbw (GB/s)", "busbw (GB/s)"}};
  for (double s = lo; s <= hi * (1 + 1e-12); s *= 2) {
    const CollectiveCost c = allreduce_cost(s, f, nccl, want);
    const double algbw = s / c.time_s;
    rows.push_back({{"size_bytes", s},
                    {"algorithm", to_string(c.algorithm)},
                    {"protocol", to_string(c.protocol)},
                    {"time_s", c.time_s},
                    {"algbw_GBps", algbw / 1e9},
                    {"busbw_GBps", c.busbw_bytes_per_s / 1e9}});
    table.push_back({size_label(s), fmt::format("{:.0f}", s),
                     fmt::format("{}/{}", to_string(c.algorithm), to_string(c.protocol)),
                     fmt::format("{:.2f}", c.time_s * 1e6), fmt::format("{:.2f}", algbw / 1e9),
                     fmt::format("{:.2f}", c.busbw_bytes_per_s / 1e9)});
  }
  const double intra_eff = nccl.ring_efficiency_for(f.intra_class, f.arch);
  const bool nvls = f.nvls && f.nodes == 1 && f.gpus_per_node >= nccl.nvls_min_gpus;  // as allreduce_cost uses it
  if (a.json) {
    nlohmann::json j{{"topology", t.name},
                     {"file", file.string()},
                     {"gpu", t.gpu.name},
                     {"nodes", t.nodes},
                     {"gpus_per_node", t.gpus_per_node},
                     {"intra_class", f.intra_class},
                     {"intra_ring_GBps_nominal", f.intra_ring_bytes_per_s / 1e9},
                     {"intra_ring_efficiency", intra_eff},
                     {"inter_node_GBps_nominal", t.nodes > 1 ? f.inter_ring_bytes_per_s / 1e9 : 0.0},
                     {"nvls", nvls},
                     {"nccl_model_version", nccl.version},
                     {"allreduce", rows}};
    emit(j.dump(2) + "\n", "");
    return;
  }
  std::string out = fmt::format("{} ({})\n", t.name, file.string());
  out +=
      fmt::format("  GPUs            {} nodes x {} = {} x {}\n", t.nodes, t.gpus_per_node, t.world_size(), t.gpu.name);
  out += fmt::format(
      "  in a node       {}: ring {:.1f} GB/s per GPU per direction nominal, x {:.3f} measured efficiency\n",
      f.intra_class, f.intra_ring_bytes_per_s / 1e9, intra_eff);
  if (t.nodes > 1)
    out += fmt::format("  between nodes   {:.1f} GB/s per node per direction (all its NICs), x {:.3f}\n",
                       f.inter_ring_bytes_per_s / 1e9, nccl.ring_efficiency_for("net", f.arch));
  out += fmt::format("  NVLS            {}\n", nvls                    ? "yes"
                                               : f.nvls && f.nodes > 1 ? "no (across nodes dpsim models ring and tree)"
                                               : f.nvls                ? "no (fewer than nvls_min_gpus GPUs)"
                                                                       : "no");
  out +=
      fmt::format("All-reduce per call as nccl-tests times it (NCCL model {}, no framework launch):\n", nccl.version);
  emit(out + render_table(table), "");
}

}  // namespace

void register_inspect_topology(CLI::App& inspect) {
  auto a = std::make_shared<TopologyArgs>();
  auto* cmd = inspect.add_subcommand(
      "topology", "Fabric of a topology and the all-reduce time/algbw/busbw dpsim predicts by message size");
  cmd->add_option("TOPOLOGY", a->topology, "Shipped topology name (topologies/*.yaml) or a path")->required();
  cmd->add_option("--nodes", a->nodes, "Nodes (default: the topology's)");
  cmd->add_option("--gpus-per-node", a->gpus_per_node, "GPUs per node: the first N of the topology's (default all)");
  cmd->add_option("--min-bytes", a->min_bytes, "Smallest message (default 8B); sizes double up to --max-bytes");
  cmd->add_option("--max-bytes", a->max_bytes, "Largest message (default 8GiB)");
  cmd->add_option("--algorithm", a->algorithm, "ring | tree | nvls | auto (NCCL's choice, default)")
      ->check(CLI::IsMember({"ring", "tree", "nvls", "auto"}));
  cmd->add_flag("--json", a->json, "Print JSON (keys as the table, plus the fabric summary)");
  cmd->callback([a] { run(*a); });
}

}  // namespace dpsim::app
