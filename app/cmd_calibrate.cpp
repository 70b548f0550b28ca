// dpsim calibrate INPUT... -o calib.yaml: fit the collective and compute constants from measurements.
#include <filesystem>

#include <fmt/format.h>

#include "commands.hpp"
#include "dpsim/calibration.hpp"
#include "dpsim/error.hpp"
#include "dpsim/load.hpp"
#include "dpsim/result.hpp"
#include "dpsim/units.hpp"
#include "dpsim/validation/fit.hpp"
#include "option_checks.hpp"
#include "summaries.hpp"
#include "tables.hpp"

namespace dpsim::app {

namespace {

namespace fs = std::filesystem;

struct CalibrateArgs {
  std::vector<std::string> inputs;
  std::string output;
  std::string name;
  std::string topology;
  std::string fabric;
  std::string scenario;
  std::vector<std::string> fits;
  bool force = false;
};

// "simple:1MiB:16GiB", "ll::64KiB", "simple/nvls:4MiB:" -> FitRange
validation::FitRange parse_fit(const std::string& text) {
  validation::FitRange r;
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t colon; (colon = text.find(':', start)) != std::string::npos; start = colon + 1)
    parts.push_back(text.substr(start, colon - start));
  parts.push_back(text.substr(start));
  if (parts.size() != 3)
    throw InputError(fmt::format("--fit \"{}\": expected PROTOCOL[/ALGORITHM]:MIN:MAX, e.g. simple:1MiB:16GiB", text));
  std::string proto = parts[0];
  if (const auto slash = proto.find('/'); slash != std::string::npos) {
    r.algorithm = proto.substr(slash + 1);
    proto = proto.substr(0, slash);
  }
  if (!fit_is_applied(r.algorithm, proto))
    throw InputError(fmt::format("--fit \"{}\": {}/{} is not a fit predict applies; accepted: {}", text, proto,
                                 r.algorithm, applied_fits_text()));
  r.protocol = proto;
  try {
    auto size = [](const std::string& t) {
      return t.find_first_not_of("0123456789") == std::string::npos ? std::stod(t) : parse_bytes(t);
    };
    if (!parts[1].empty()) r.min_bytes = size(parts[1]);
    if (!parts[2].empty()) r.max_bytes = size(parts[2]);
  } catch (const std::exception& e) {
    throw InputError(fmt::format("--fit \"{}\": {}", text, e.what()));
  }
  return r;
}

int sweep_world_size(const std::vector<Calibration>& inputs) {
  for (const auto& c : inputs)
    if (!c.allreduce.empty()) return c.allreduce_world_size;
  return 0;
}

// A log measured on other GPUs than --topology's would fit that topology's links with another machine's numbers.
void refuse_other_gpu(const std::string& input, const Calibration& c, const std::string& topology) {
  const auto gpu = c.context.find("gpu");
  if (topology.empty() || gpu == c.context.end()) return;
  const GpuSpec expected = load_topology(resolve_topology(topology, fs::current_path())).gpu;
  if (gpu->second == expected.name) return;
  throw InputError(
      fmt::format("calibrate: {} was measured on {}, but --topology {} has {} ({}): give the topology of the "
                  "machine that ran it",
                  input, gpu->second, topology, expected.name, expected.key));
}

// The fabric the fit describes: --topology's, on as many nodes as the log has ranks; else --fabric (nominal
// bandwidth unknown, so no efficiency).
validation::FitTarget fit_target_for(const CalibrateArgs& a, const NcclModel& nccl,
                                     const std::vector<Calibration>& inputs, std::string& report) {
  if (a.topology.empty()) {
    validation::FitTarget t;  // fabric unknown: nvswitch unless --fabric says otherwise
    if (!a.fabric.empty()) t.fabric = a.fabric;
    t.nodes = t.fabric == "net" || t.fabric == "efa" ? 2 : 1;
    t.ring_fill = nccl.ring_fill;
    t.nvls_fill = nccl.nvls_fill;
    return t;
  }
  Topology t = load_topology(resolve_topology(a.topology, fs::current_path()));
  const int world = sweep_world_size(inputs);
  if (world > 0 && world != t.world_size()) {
    const bool whole_nodes = world % t.gpus_per_node == 0;
    if (!whole_nodes && world > t.gpus_per_node)
      throw InputError(
          fmt::format("calibrate: the all-reduce sweep has {} ranks, not a whole number of {}'s nodes "
                      "of {} GPUs",
                      world, t.name, t.gpus_per_node));
    const int nodes = whole_nodes ? world / t.gpus_per_node : 1;
    const int gpus = whole_nodes ? t.gpus_per_node : world;
    t = sized_topology(t, nodes, gpus, [&](const std::string& msg) {
      throw InputError(fmt::format("calibrate: --topology {} on {} node(s) x {} GPUs (the sweep's {} ranks): {}",
                                   a.topology, nodes, gpus, world, msg));
    });
    report += fmt::format("topology {} as {} node{} x {} GPUs (the sweep's {} ranks)\n", t.name, nodes,
                          nodes == 1 ? "" : "s", gpus, world);
  }
  return validation::fit_target(t, nccl);
}

}  // namespace

void register_calibrate(CLI::App& app) {
  auto a = std::make_shared<CalibrateArgs>();
  auto* cmd = app.add_subcommand("calibrate", kCalibrateSummary);
  cmd->add_option(
         "INPUT", a->inputs,
         "dpsim measure --calibrate YAML, nccl-tests all_reduce_perf logs, or measured step JSON (with --scenario)")
      ->required();
  cmd->add_option("-o,--output", a->output, "Calibration YAML to write")->required()->check(non_empty());
  cmd->add_option("--name", a->name, "Calibration name (default: the output file stem)");
  cmd->add_option("--topology", a->topology,
                  "Topology the data was measured on: sets the fabric and its nominal link bandwidth");
  cmd->add_option("--fabric", a->fabric,
                  "nvswitch | pcie | nvlink_mesh | net | efa, when no --topology is given (efficiency then unknown)")
      ->check(CLI::IsMember({"nvswitch", "pcie", "nvlink_mesh", "net", "efa"}));
  cmd->add_option("--scenario", a->scenario, "Scenario of the measured step JSON inputs (FLOPs per phase)");
  cmd->add_option("--fit", a->fits,
                  fmt::format("PROTOCOL[/ALGORITHM]:MIN:MAX size range of one fit, repeatable; PROTOCOL[/ALGORITHM] "
                              "is one of {} (default: simple over every size)",
                              applied_fits_text()));
  cmd->add_flag("--force", a->force,
                "Write a fit whose residuals exceed the limits (docs/validation.md), with a warning");
  cmd->callback([a] {
    validation::CalibrateOptions o;
    o.name = a->name.empty() ? fs::path(a->output).stem().string() : a->name;
    o.force = a->force;
    for (const auto& in : a->inputs) o.inputs += (o.inputs.empty() ? "" : ", ") + in;
    for (const auto& f : a->fits) o.ranges.push_back(parse_fit(f));
    std::vector<Calibration> inputs;
    std::vector<validation::StepFit> steps;
    std::string report;
    for (const auto& in : a->inputs) {
      if (fs::path(in).extension() == ".json") {
        if (a->scenario.empty())
          throw InputError(fmt::format("{}: a measured step JSON needs --scenario to know its FLOPs", in));
        const Scenario s = load_scenario(a->scenario);
        const auto f = validation::fit_step(s, read_result(in));
        report +=
            fmt::format("{}: GEMM efficiency {:.3f} (forward), overlap slowdown {:.3f} (backward beside all-reduces)\n",
                        in, f.gemm_efficiency, f.overlap_slowdown);
        steps.push_back(f);
      } else {
        const Calibration c = validation::read_calibration_input(in);
        report += fmt::format("{}: {} ({} all-reduce rows, world size {}, {} GEMM shapes)\n", in, c.source,
                              c.allreduce.size(), c.allreduce_world_size, c.gemm.size());
        refuse_other_gpu(in, c, a->topology);
        inputs.push_back(c);
      }
    }
    const NcclModel nccl = load_nccl(data_root() / "data" / "nccl.yaml");
    o.target = fit_target_for(*a, nccl, inputs, report);
    std::vector<std::string> warnings;
    const Calibration out = validation::calibrate(inputs, steps, o, &warnings);
    write_calibration(a->output, out);
    for (const auto& w : warnings) fmt::print(stderr, "{}\n", w);
    for (const auto& f : out.fits) report += "fit: " + validation::describe_fit(f) + "\n";
    if (out.gemm_efficiency > 0) report += fmt::format("gemm_efficiency: {:.3f}\n", out.gemm_efficiency);
    if (out.overlap_slowdown > 0) report += fmt::format("overlap_slowdown: {:.3f}\n", out.overlap_slowdown);
    report += fmt::format("wrote {} (name {}, {})\n", a->output, out.name, calibration_hash(out));
    emit(report, "");
  });
}

}  // namespace dpsim::app
