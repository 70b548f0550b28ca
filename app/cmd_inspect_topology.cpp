// dpsim inspect topology NAME: the fabric dpsim sees in a topology and the NCCL all-reduce it predicts at each
// message size, printed the way nccl-tests' all_reduce_perf prints a sweep (time per call, algbw, busbw).
#include <cmath>
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "dpsim/calibration.hpp"
#include "dpsim/collective_algorithm.hpp"
#include "dpsim/cost.hpp"
#include "dpsim/error.hpp"
#include "dpsim/load.hpp"
#include "dpsim/nccl_release.hpp"
#include "dpsim/tuner_plugin.hpp"
#include "dpsim/units.hpp"
#include "option_checks.hpp"
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
  std::string calibration;  // a calibration YAML applied as predict applies it
  // nccl-tests: NCCL's time alone; torch: + PyTorch's launch of each call; nccl-tests-single-thread: nccl-tests -g N,
  // no faster than one thread's launches on the node's GPUs
  std::string framework = "nccl-tests";
  std::string nccl_release;  // "": data/nccl.yaml's nccl_version
  bool json = false;
  bool collnet = false;  // NCCL_COLLNET_ENABLE=1: NCCL's choice also weighs CollNet (a SHARP network)
};

double size_option(const std::string& text, const char* option) {
  try {
    const double b = parse_bytes(text);
    if (b >= 1 && b <= 1e15) return b;
  } catch (const std::exception&) {
  }
  throw InputError(fmt::format("{}: \"{}\" is not a message size from 1B to 1PB (e.g. 8B, 1MiB, 8GiB)", option, text));
}

// NCCL's all-reduce at lo, 2 lo, 4 lo ... <= hi.
std::vector<std::pair<double, CollectiveCost>> sweep(const FabricSummary& f, const NcclModel& nccl,
                                                     const TopologyArgs& a) {
  const double lo = size_option(a.min_bytes, "--min-bytes"), hi = size_option(a.max_bytes, "--max-bytes");
  if (hi < lo) throw InputError("inspect topology: --max-bytes is smaller than --min-bytes");
  Collective want{algorithm_named(a.algorithm).value_or(Algorithm::automatic), Protocol::automatic};
  want.collnet = a.collnet;
  const CallLaunch launch = a.framework == "torch"                      ? CallLaunch::torch
                            : a.framework == "nccl-tests-single-thread" ? CallLaunch::single_thread
                                                                        : CallLaunch::nccl_tests;
  std::vector<std::pair<double, CollectiveCost>> rows;
  for (double s = lo; s <= hi * (1 + 1e-12); s *= 2) {
    const CollectiveCost c = allreduce_cost(s, f, nccl, want);
    rows.push_back({s, as_launched(c, launch, CollectiveKind::all_reduce, s, f, nccl)});
  }
  return rows;
}

struct Inspected {
  Topology topology;
  std::filesystem::path file;
  FabricSummary summary;
  double intra_efficiency = 0;
  std::string nvls;      // empty where NCCL runs NVLS here, else why not (algorithm_unavailable_reason)
  std::string nvlstree;  // the same for NVLSTree
  std::optional<CalibrationReport> calibration;
  nlohmann::json calibration_json;  // null without --calibration
};

nlohmann::json to_json(const Inspected& fb, const NcclModel& nccl, const TopologyArgs& a,
                       const std::vector<std::pair<double, CollectiveCost>>& rows) {
  const Topology& t = fb.topology;
  const FabricSummary& f = fb.summary;
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [s, c] : rows) {
    out.push_back({{"size_bytes", s},
                   {"algorithm", to_string(c.algorithm)},
                   {"protocol", to_string(c.protocol)},
                   {"time_s", c.time_s},
                   {"algbw_GBps", s / c.time_s / 1e9},
                   {"busbw_GBps", c.busbw_bytes_per_s / 1e9}});
  }
  return {{"topology", t.name},
          {"file", fb.file.string()},
          {"gpu", t.gpu.name},
          {"nodes", t.nodes},
          {"gpus_per_node", t.gpus_per_node},
          {"intra_class", f.intra_class},
          {"intra_ring_GBps_nominal", f.intra_ring_bytes_per_s / 1e9},
          {"intra_ring_efficiency", fb.intra_efficiency},
          {"intra_ring_hops", f.intra_ring_edges},
          {"intra_shm_hops", f.intra_shm_edges},
          {"host_staged_GBps",
           f.intra_shm_edges > 0 ? nlohmann::json(host_staged_rate(f, nccl) / 1e9) : nlohmann::json(nullptr)},
          {"inter_node_GBps_nominal", t.nodes > 1 ? f.inter_ring_bytes_per_s / 1e9 : 0.0},
          {"inter_node_nics_GBps_nominal", t.nodes > 1 ? f.nic_ring_bytes_per_s / 1e9 : 0.0},
          {"inter_node_uplink_GBps_nominal", t.nodes > 1 && std::isfinite(f.uplink_ring_bytes_per_s)
                                                 ? nlohmann::json(f.uplink_ring_bytes_per_s / 1e9)
                                                 : nlohmann::json(nullptr)},
          {"inter_node_transport", to_string(t.network.transport)},
          {"inter_node_efficiency", t.nodes > 1 ? nccl.ring_efficiency_for(f.net_class, f.arch) : 0.0},
          {"net_plugin_latency_s", nccl.net_plugin_latency(f.net_class)},
          {"nvls", fb.nvls.empty()},
          {"nvlstree", fb.nvlstree.empty()},
          {"tuner_plugin", f.tuner_plugin ? nlohmann::json(f.tuner_plugin->name) : nlohmann::json(nullptr)},
          {"framework", a.framework},
          {"nccl_model_version", nccl.version},
          {"nccl_tuning_release", nccl.tuning_release.empty() ? nccl.version : nccl.tuning_release},
          {"calibration", fb.calibration_json},
          {"allreduce", out}};
}

// What bounds the ring between nodes: the NICs (their count x the slowest) or an oversubscribed uplink.
std::string inter_limit(const Topology& t, const FabricSummary& f) {
  const std::string nics = fmt::format("{} NICs x slowest {:.1f} GB/s", t.nics.size(),
                                       f.nic_ring_bytes_per_s / static_cast<double>(t.nics.size()) / 1e9);
  if (!f.uplink_bound()) return nics;
  return fmt::format("{:g}:1 oversubscribed {} uplink; {} would give {:.1f}", t.network.oversubscription,
                     t.network.kind == NetworkKind::fat_tree ? "leaf" : "rail", nics, f.nic_ring_bytes_per_s / 1e9);
}

// How NCCL moves data between the node's GPUs (core/cost nccl_uses_p2p): peer-to-peer, or through host memory.
std::string transport_line(const Topology& t, const FabricSummary& f, const NcclModel& nccl) {
  const std::string setting = fmt::format("intra_node.p2p {}{}", to_string(t.intra.p2p),
                                          t.gpu.pcie_p2p ? "" : ", no P2P in the GPU's stock driver");
  if (f.intra_shm_edges == 0)
    return fmt::format("  GPU to GPU      peer-to-peer on all {} ring hops ({})\n", f.intra_ring_edges, setting);
  return fmt::format(
      "  GPU to GPU      through host memory (NCCL's SHM) on {} of {} ring hops ({}): {:.1f} GB/s per direction "
      "staged ({}), x {:.3f} measured efficiency\n",
      f.intra_shm_edges, f.intra_ring_edges, setting, host_staged_rate(f, nccl) / 1e9, host_staged_source(f),
      nccl.ring_efficiency_for("shm", f.arch));
}

// The platform's tuner plugin, and whether its table covers this cluster.
std::string tuner_line(const TunerPlugin& p, const FabricSummary& f) {
  const bool applies = f.nodes >= p.min_nodes && f.gpus_per_node == p.gpus_per_node;
  return fmt::format("  NCCL tuner      {} ({}): {}\n", p.name, p.source,
                     applies ? "its regions pick the algorithm and protocol (NCCL's own model elsewhere)"
                             : fmt::format("not on this cluster (its table is for {}+ nodes of {} GPUs): NCCL's own",
                                           p.min_nodes, p.gpus_per_node));
}

// The line above the table: how the calls are timed, and whose tuning tables the model uses.
std::string timing_line(const FabricSummary& f, const NcclModel& nccl, const TopologyArgs& a) {
  const std::string model = nccl.tuning_release.empty()
                                ? fmt::format("NCCL model {}", nccl.version)
                                : fmt::format("NCCL model {}, tuning tables of {} for NCCL {}", nccl.version,
                                              nccl.tuning_release, a.nccl_release);
  if (a.framework == "torch")
    return fmt::format(
        "All-reduce per call as torch.distributed.all_reduce times it ({}, + {} PyTorch launch per call, "
        "data/nccl.yaml framework_launch_overhead):\n",
        model, format_seconds(nccl.framework_launch_overhead_s));
  if (a.framework == "nccl-tests-single-thread")
    return fmt::format(
        "All-reduce per call as nccl-tests -g {} times it ({}; one thread launches on {} GPUs: at least {} per "
        "call, data/nccl.yaml single_thread_launch_per_gpu):\n",
        f.gpus_per_node, model, f.gpus_per_node, format_seconds(f.gpus_per_node * nccl.single_thread_launch_per_gpu_s));
  return fmt::format(
      "All-reduce per call as nccl-tests times it ({}, no framework launch; --framework torch adds PyTorch's):\n",
      model);
}

std::string to_text(const Inspected& fb, const NcclModel& nccl, const TopologyArgs& a,
                    const std::vector<std::pair<double, CollectiveCost>>& rows) {
  const Topology& t = fb.topology;
  const FabricSummary& f = fb.summary;
  std::string out = fmt::format("{} ({})\n", t.name, fb.file.string());
  out += fmt::format("  GPUs            {} node{} x {} = {} x {}\n", t.nodes, t.nodes == 1 ? "" : "s", t.gpus_per_node,
                     t.world_size(), t.gpu.name);
  if (f.intra_shm_edges > 0 && f.intra_shm_edges == f.intra_ring_edges)  // no peer-to-peer hop: the links' rate only
    out += fmt::format("  in a node       {}: {:.1f} GB/s per GPU per direction nominal links\n", f.intra_class,
                       f.intra_ring_bytes_per_s / 1e9);
  else
    out += fmt::format(
        "  in a node       {}: ring {:.1f} GB/s per GPU per direction nominal, x {:.3f} measured efficiency\n",
        f.intra_class, f.intra_ring_bytes_per_s / 1e9, fb.intra_efficiency);
  if (t.intra.kind == IntraKind::pcie) out += transport_line(t, f, nccl);
  if (t.nodes > 1) {
    const double plugin_s = nccl.net_plugin_latency(f.net_class);
    out += fmt::format(
        "  between nodes   {}: {:.1f} GB/s per node per direction ({}), x {:.3f}{}\n", to_string(t.network.transport),
        f.inter_ring_bytes_per_s / 1e9, inter_limit(t, f), nccl.ring_efficiency_for(f.net_class, f.arch),
        plugin_s > 0 ? fmt::format(", +{} per inter-node step (network plugin)", format_seconds(plugin_s))
                     : std::string());
  }
  out += fmt::format("  NVLS            {}\n", fb.nvls.empty() ? "yes" : "no: " + fb.nvls);
  if (f.nvls && f.nodes > 1)
    out += fmt::format("  NVLSTree        {}\n", fb.nvlstree.empty() ? "yes" : "no: " + fb.nvlstree);
  if (f.tuner_plugin) out += tuner_line(*f.tuner_plugin, f);
  if (fb.calibration) out += "  " + fb.calibration->summary() + "\n";
  out += timing_line(fb.summary, nccl, a);
  std::vector<std::vector<std::string>> table{
      {"size", "bytes", "algorithm", "time (us)", "algbw (GB/s)", "busbw (GB/s)"}};
  for (const auto& [s, c] : rows) {
    table.push_back({format_size_label(s), fmt::format("{:.0f}", s),
                     fmt::format("{}/{}", to_string(c.algorithm), to_string(c.protocol)),
                     fmt::format("{:.2f}", c.time_s * 1e6), fmt::format("{:.2f}", s / c.time_s / 1e9),
                     fmt::format("{:.2f}", c.busbw_bytes_per_s / 1e9)});
  }
  return out + render_table(table);
}

void run(const TopologyArgs& a) {
  Inspected fb;
  try {
    fb.file = find_topology(a.topology, std::filesystem::current_path());
  } catch (const InputError& e) {
    throw InputError(fmt::format("inspect topology: {}", e.what()));
  }
  const Topology loaded = load_topology(fb.file);
  if (a.gpus_per_node > loaded.gpus_per_node)
    throw InputError(
        fmt::format("inspect topology: --gpus-per-node {}: {} has {} GPUs per node; give at most that many "
                    "(the first N of them), or a topology file with a larger node",
                    a.gpus_per_node, loaded.name, loaded.gpus_per_node));
  fb.topology = sized_topology(
      loaded, a.nodes > 0 ? a.nodes : loaded.nodes, a.gpus_per_node > 0 ? a.gpus_per_node : loaded.gpus_per_node,
      [](const std::string& msg) { throw InputError("inspect topology (--nodes, --gpus-per-node): " + msg); });
  NcclModel nccl = load_nccl(data_root() / "data" / "nccl.yaml");
  if (!a.nccl_release.empty()) {
    try {
      nccl = nccl_for_release(nccl, a.nccl_release);
    } catch (const InputError& e) {
      throw InputError(fmt::format("inspect topology: --nccl-release: {}", e.message()));
    }
  }
  if (!a.calibration.empty()) {  // through the scenario, as predict applies it
    Scenario s;
    s.topology = fb.topology;
    s.nccl = nccl;
    const Calibration c = read_calibration(a.calibration);
    fb.calibration = apply_calibration(s, c);
    fb.calibration_json = fb.calibration->to_json(c);
    nccl = s.nccl;
  }
  fb.summary = summarize_fabric(fb.topology);
  fb.intra_efficiency = nccl.ring_efficiency_for(fb.summary.intra_class, fb.summary.arch);
  fb.nvls = algorithm_unavailable_reason(Algorithm::nvls, CollectiveKind::all_reduce, fb.summary, nccl);
  fb.nvlstree = algorithm_unavailable_reason(Algorithm::nvlstree, CollectiveKind::all_reduce, fb.summary, nccl);
  if (a.algorithm != "auto") {
    const std::string why =
        algorithm_unavailable_reason(*algorithm_named(a.algorithm), CollectiveKind::all_reduce, fb.summary, nccl);
    if (!why.empty()) throw InputError(fmt::format("inspect topology: --algorithm {}: {}", a.algorithm, why));
  }
  const auto rows = sweep(fb.summary, nccl, a);
  emit(a.json ? to_json(fb, nccl, a, rows).dump(2) + "\n" : to_text(fb, nccl, a, rows), "");
}

}  // namespace

void register_inspect_topology(CLI::App& inspect) {
  auto a = std::make_shared<TopologyArgs>();
  auto* cmd = inspect.add_subcommand(
      "topology", "Fabric of a topology and the all-reduce time/algbw/busbw dpsim predicts by message size");
  cmd->add_option("TOPOLOGY", a->topology, "Shipped topology name (topologies/*.yaml) or a path")->required();
  cmd->add_option("--nodes", a->nodes, "Nodes (default: the topology's)")->check(whole_number_in(1, 1 << 20));
  cmd->add_option("--gpus-per-node", a->gpus_per_node, "GPUs per node: the first N of the topology's (default all)")
      ->check(whole_number_in(1, 1024));
  cmd->add_option("--min-bytes", a->min_bytes, "Smallest message (default 8B); sizes double up to --max-bytes");
  cmd->add_option("--max-bytes", a->max_bytes, "Largest message (default 8GiB)");
  cmd->add_option("--algorithm", a->algorithm, algorithm_names(false) + " or auto (NCCL's choice, default)")
      ->check(CLI::IsMember(algorithm_name_list(true)));
  cmd->add_option("--calibration", a->calibration,
                  "Calibration YAML from dpsim calibrate, applied as predict applies it: the table shows the "
                  "calibrated all-reduce (compare it with the log)");
  cmd->add_option("--framework", a->framework,
                  "nccl-tests (NCCL's time per call, default), torch (+ PyTorch's launch of each call, as "
                  "torch.distributed.all_reduce and each DDP bucket pay it) or nccl-tests-single-thread (nccl-tests "
                  "-g N: one thread launches on all N GPUs of the node, at least N x data/nccl.yaml "
                  "single_thread_launch_per_gpu per call)")
      ->check(CLI::IsMember({"nccl-tests", "torch", "nccl-tests-single-thread"}));
  cmd->add_option("--nccl-release", a->nccl_release,
                  "NCCL release whose tuning tables to use (e.g. 2.18.5: the newest table of data/nccl.yaml releases "
                  "at or below it; default: its nccl_version)");
  cmd->add_flag("--collnet", a->collnet,
                "NCCL_COLLNET_ENABLE=1: NCCL's choice (auto) also weighs CollNetChain, on a topology whose network "
                "reduces in its switches (network.sharp)");
  cmd->add_flag("--json", a->json, "Print JSON (keys as the table, plus the fabric summary)");
  cmd->callback([a] { run(*a); });
}

}  // namespace dpsim::app
