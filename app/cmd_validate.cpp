// dpsim validate: predicted vs measured (phase by phase, bucket by bucket), and the published reference set.
#include <filesystem>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "commands.hpp"
#include "dpsim/backend/measure.hpp"
#include "dpsim/calibration.hpp"
#include "dpsim/error.hpp"
#include "dpsim/load.hpp"
#include "dpsim/plan.hpp"
#include "dpsim/result.hpp"
#include "dpsim/sim/simulate.hpp"
#include "dpsim/validation/compare.hpp"
#include "dpsim/validation/reference.hpp"
#include "option_checks.hpp"
#include "set_option.hpp"
#include "summaries.hpp"
#include "tables.hpp"

namespace dpsim::app {

namespace {

namespace fs = std::filesystem;

struct ValidateArgs {
  std::string scenario;
  std::string predicted;
  std::string measured;
  std::string calibration;
  std::string reference;
  std::string csv;
  std::string plot;
  std::string markdown;
  std::string output;
  double tolerance = -1;
  bool estimate_ddp = false;
  bool json = false;
  std::vector<std::string> sets;
};

// What the measured run executed where the scenario differs: the GPU it ran on (context.gpu_name, where the catalog
// has a GPU of that name: measure --gpus runs a scenario on another machine's GPUs), and the optimizer implementation
// the backend ran (context.optimizer_impl; backend::kExecutorOptimizerImpl, which every `measure` result ran, also
// those written before the field was recorded). Returns ", training.optimizer_impl ... as measured" for the header, or
// "".
std::string measured_gpu(Scenario& s, const StepResult& measured) {
  const std::string name = measured.context.value("gpu_name", "");
  if (name.empty() || name == s.topology.gpu.name) return "";
  for (GpuSpec& g : load_gpu_catalog()) {
    if (g.name != name) continue;
    s.topology.gpu = std::move(g);
    return fmt::format(", on the measured {} (cluster.gpu {})", name, s.topology.gpu.key);
  }
  return fmt::format(", on the scenario's {}: the measured '{}' is not in the GPU catalog", s.topology.gpu.key, name);
}

std::string measure_as_run(Scenario& s, const StepResult& measured, const std::string& file) {
  std::string ran = measured_gpu(s, measured);
  const std::string impl = measured.context.value(
      "optimizer_impl", measured.mode == "measure" ? to_string(backend::kExecutorOptimizerImpl) : "");
  if (impl.empty() || impl == to_string(s.training.optimizer_impl)) return ran;
  const std::map<std::string, OptimizerImpl> known{
      {"foreach", OptimizerImpl::foreach}, {"fused", OptimizerImpl::fused}, {"forloop", OptimizerImpl::forloop}};
  const auto it = known.find(impl);
  if (it == known.end())
    throw InputError(fmt::format("{}: context.optimizer_impl \"{}\": expected foreach, fused or forloop", file, impl));
  s.training.optimizer_impl = it->second;
  return ran + fmt::format(", training.optimizer_impl {} as measured", impl);
}

// The calibration a measured file names in its context: "calibration": "file.yaml" or {"file": ...}.
std::optional<fs::path> calibration_named_in(const StepResult& measured, const fs::path& measured_file) {
  const auto& c = measured.context;
  if (!c.is_object() || !c.contains("calibration")) return std::nullopt;
  std::string name;
  if (c["calibration"].is_string())
    name = c["calibration"].get<std::string>();
  else if (c["calibration"].is_object())
    for (const char* key : {"file", "path"})
      if (c["calibration"].contains(key) && c["calibration"][key].is_string())
        name = c["calibration"][key].get<std::string>();
  if (name.empty()) return std::nullopt;
  for (const fs::path& p : {fs::path(name), measured_file.parent_path() / name})
    if (fs::exists(p)) return p;
  throw InputError(fmt::format("{}: context.calibration names \"{}\", which is not found (pass --calibration FILE)",
                               measured_file.string(), name));
}

void run_reference(const ValidateArgs& a) {
  validation::ReferenceOptions o;
  o.simulate_ddp = !a.estimate_ddp;
  const auto report = validation::score_reference(a.reference, o);
  if (!a.csv.empty()) write_file_atomic(a.csv, validation::reference_csv(report));
  if (!a.plot.empty()) validation::plot_reference(report, a.plot);
  if (!a.markdown.empty())
    write_file_atomic(a.markdown,
                      validation::reference_markdown(report, load_nccl(data_root() / "data" / "nccl.yaml").version));
  std::string text = validation::render_reference(report);
  if (!a.csv.empty()) text += "\nCSV: " + a.csv + "\n";
  if (!a.plot.empty()) text += "Plot: " + a.plot + "\n";
  if (!a.markdown.empty()) text += "Markdown: " + a.markdown + "\n";
  emit(text, a.output);
}

void run_compare(const ValidateArgs& a) {
  const StepResult measured = read_result(a.measured);
  StepResult predicted;
  std::optional<double> scenario_tolerance;
  std::string header;
  if (!a.predicted.empty()) {
    predicted = read_result(a.predicted);
    header =
        fmt::format("predicted: {} ({})\nmeasured:  {} ({})\n", a.predicted, predicted.mode, a.measured, measured.mode);
  } else {
    const auto overrides = parse_sets(a.sets);
    Scenario s = load_scenario_set(a.scenario, overrides);
    scenario_tolerance = s.tolerance;
    std::optional<fs::path> cal_file;
    if (!a.calibration.empty())
      cal_file = fs::path(a.calibration);
    else
      cal_file = calibration_named_in(measured, a.measured);
    nlohmann::json cal_ctx;
    if (cal_file) {
      const Calibration cal = read_calibration(*cal_file);
      apply_calibration(s, cal);
      cal_ctx = calibration_context(cal);
      cal_ctx["file"] = cal_file->string();
    }
    // The measured run may have used fewer GPUs than the scenario names (measure --gpus): predict those.
    // Resized as the scenario's cluster.gpus_per_node would (core's sized_topology: a PCIe tree or NVLink mesh
    // keeps its first GPUs' switches and links), not by editing gpus_per_node alone.
    const int gpus = measured.context.value("gpu_count", 0);
    if (gpus > 0 && s.topology.nodes == 1 && gpus < s.topology.gpus_per_node)
      s.topology = sized_topology(std::move(s.topology), 1, gpus, [&](const std::string& msg) {
        throw InputError(fmt::format("{}: context.gpu_count {}: {}", a.measured, gpus, msg));
      });
    const std::string ran = measure_as_run(s, measured, a.measured);
    SimOptions o;
    o.progress = true;
    o.timeline = false;  // compared on the step's figures
    predicted = simulate(s, make_step_plan(s), o);
    record_overrides(overrides, predicted);
    if (!cal_ctx.is_null()) predicted.context["calibration"] = cal_ctx;
    header = fmt::format("predicted: dpsim predict {}{} ({} GPUs{})\nmeasured:  {} ({})\n", a.scenario,
                         cal_file ? " with calibration " + cal_file->string() + " " + cal_ctx.value("hash", "") : "",
                         s.world_size(), ran, a.measured, measured.mode);
  }
  std::string from;
  const double tol = validation::pick_tolerance(a.tolerance > 0 ? std::optional<double>(a.tolerance) : std::nullopt,
                                                predicted, measured, scenario_tolerance, &from);
  validation::Comparison c = validation::compare(predicted, measured, tol);
  c.tolerance_from = from;
  emit(header + "\n" + validation::render_comparison(c), a.output);
  if (!c.pass)
    throw validation::ValidationFailed(
        fmt::format("{}: prediction outside the {:.1f}% tolerance", c.scenario, 100 * tol));
}

}  // namespace

void register_validate(CLI::App& app) {
  auto a = std::make_shared<ValidateArgs>();
  auto* cmd = app.add_subcommand("validate", kValidateSummary);
  cmd->add_option("SCENARIO", a->scenario, "Scenario YAML to re-predict with the simulator (with --measured)");
  cmd->add_option("--measured", a->measured, "Measured result JSON (dpsim measure --json)");
  cmd->add_option("--predicted", a->predicted, "Predicted result JSON (dpsim predict --json) instead of re-predicting");
  cmd->add_option(
      "--calibration", a->calibration,
      "Calibration YAML applied before re-predicting (default: the one named in the measured file's context)");
  cmd->add_option("--tolerance", a->tolerance,
                  "Relative tolerance (default: context, then the scenario's validation.tolerance, then 0.10)")
      ->check(finite_positive());
  cmd->add_option("--reference", a->reference, "Directory of published reference entries (validation/reference)")
      ->check(non_empty());
  cmd->add_option("--csv", a->csv, "With --reference: write every scored number to this CSV")->check(non_empty());
  cmd->add_option("--plot", a->plot,
                  "With --reference: log-log plot predicted vs published (.png or .svg, needs gnuplot)")
      ->check(non_empty());
  cmd->add_option("--markdown", a->markdown,
                  "With --reference: write the error tables as Markdown (validation/reference-errors.md)")
      ->check(non_empty());
  cmd->add_flag("--estimate-ddp", a->estimate_ddp,
                "With --reference: predict DDP entries in closed form instead of simulating");
  cmd->add_option("-o,--output", a->output, "Write the report to this file (atomically) instead of stdout")
      ->check(non_empty());
  add_set_option(cmd, a->sets);
  cmd->callback([a] {
    if (!a->reference.empty()) {
      if (!a->measured.empty() || !a->predicted.empty() || !a->scenario.empty() || !a->sets.empty())
        throw InputError(
            "validate: --reference scores the reference set; do not combine it with SCENARIO, --measured, "
            "--predicted or --set");
      run_reference(*a);
      return;
    }
    if (!a->csv.empty() || !a->plot.empty() || !a->markdown.empty())
      throw InputError("validate: --csv, --plot and --markdown go with --reference");
    if (a->measured.empty())
      throw InputError("validate: give --measured FILE (with SCENARIO or --predicted FILE), or --reference DIR");
    if (a->scenario.empty() == a->predicted.empty())
      throw InputError("validate: give exactly one of SCENARIO (re-predict) or --predicted FILE");
    if (!a->predicted.empty() && !a->calibration.empty())
      throw InputError("validate: --calibration applies when re-predicting a SCENARIO, not to a --predicted file");
    if (!a->predicted.empty() && !a->sets.empty())
      throw InputError("validate: --set applies when re-predicting a SCENARIO, not to a --predicted file");
    run_compare(*a);
  });
}

}  // namespace dpsim::app
