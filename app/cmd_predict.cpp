// dpsim predict SCENARIO: simulate one training step on SimGrid.
#include <fmt/format.h>
#include <chrono>
#include <map>
#include <optional>

#include "commands.hpp"
#include "dpsim/advice.hpp"
#include "dpsim/calibration.hpp"
#include "dpsim/load.hpp"
#include "dpsim/plan.hpp"
#include "dpsim/sim/simulate.hpp"
#include "dpsim/sim/trace.hpp"
#include "dpsim/units.hpp"
#include "option_checks.hpp"
#include "report.hpp"
#include "set_option.hpp"
#include "summaries.hpp"

namespace dpsim::app {

namespace {

struct PredictArgs {
  std::string scenario;
  std::string calibration;
  bool json = false;
  bool buckets = false;
  std::string trace;
  std::string fidelity = "fast";
  bool no_overlap = false;
  std::string output;
  int trace_ranks = 8;
  bool no_advice = false;
  double max_events = 5e6;
  std::string max_memory = "8GiB";
  std::vector<std::string> sets;
};

Section collective_section(const StepResult& r) {
  Section c{
      r.sharding == "zero1" ? "Reduce-scatter per bucket (NCCL's choice)" : "All-reduce per bucket (NCCL's choice)",
      {}};
  std::map<std::string, std::pair<int, long long>> by_choice;  // "ring/simple" -> (buckets, bytes)
  for (const auto& b : r.buckets) {
    auto& e = by_choice[b.algorithm + "/" + b.protocol];
    e.first++;
    e.second += b.bytes;
  }
  for (const auto& [choice, e] : by_choice)
    c.add(choice, fmt::format("{} bucket{}, {}{}", e.first, e.first == 1 ? "" : "s",
                              format_bytes(static_cast<double>(e.second)),
                              r.data_group_gpus() == 1 ? " (a data-parallel group of 1 GPU: nothing moves)" : ""));
  return c;
}

std::string bucket_table(const StepResult& r) {
  std::vector<std::vector<std::string>> rows{
      {"bucket", "bytes", "ready", "start", "end", "duration", "algorithm", "protocol"}};
  for (const auto& b : r.buckets)
    rows.push_back({std::to_string(b.index), format_bytes(static_cast<double>(b.bytes)), format_seconds(b.ready_s),
                    format_seconds(b.start_s), format_seconds(b.end_s), format_seconds(b.end_s - b.start_s),
                    b.algorithm, b.protocol});
  return render_table(rows);
}

std::string render(const Scenario& s, const StepResult& r, const SimOptions& o, bool buckets) {
  auto sections = common_sections(s, r);
  if (!r.buckets.empty()) sections.push_back(collective_section(r));
  sections.push_back(step_section(
      r,
      fmt::format("Step (simulated, {} fidelity{})", to_string(o.fidelity), o.overlap ? "" : ", no overlap").c_str()));
  if (has_cost_section(r)) sections.push_back(cost_section(s, r));
  if (!r.advice.empty()) sections.push_back(advice_section(r));
  std::string text = render_sections(sections);
  if (buckets) text += "\nBuckets (launch order)\n" + bucket_table(r);
  return text;
}

}  // namespace

void register_predict(CLI::App& app) {
  auto args = std::make_shared<PredictArgs>();
  auto* cmd = app.add_subcommand("predict", kPredictSummary);
  cmd->add_option("SCENARIO", args->scenario, "Scenario YAML file (scenarios/*.yaml)")->required();
  cmd->add_flag("--json", args->json, "Print the result JSON (keys in docs/metrics.md) instead of a table");
  cmd->add_flag("--buckets", args->buckets, "Add a per-bucket table (bytes, ready, start, end, algorithm, protocol)");
  cmd->add_option("--trace", args->trace, "Write a Chrome trace (open in Perfetto) to this file")->check(non_empty());
  cmd->add_option("--trace-ranks", args->trace_ranks,
                  "GPUs shown in the trace at most (default 8): the first, the last and evenly spaced ones")
      ->check(whole_number_in(1, 1 << 20));
  cmd->add_option(
         "--fidelity", args->fidelity,
         "fast (bucket-granularity flows, default) or step (every NCCL step of every call as messages: ring hops, "
         "tree, NVLS and NVLSTree chunks)")
      ->check(CLI::IsMember({"fast", "step"}));
  cmd->add_flag("--no-overlap", args->no_overlap, "Start communication only after the whole backward");
  cmd->add_option("--calibration", args->calibration,
                  "Calibration YAML from dpsim calibrate (fitted from nccl-tests logs or measure --calibrate)")
      ->check(non_empty());
  cmd->add_option("-o,--output", args->output, "Write to this file (atomically) instead of stdout")->check(non_empty());
  cmd->add_option(
         "--max-events", args->max_events,
         "Refuse a run estimated to simulate more activities than this (default 5e6; where calls lay flows, every "
         "flow counts: step fidelity's steps x flows, fast fidelity's calls that share links; no GPU cap)")
      ->check(finite_positive());
  cmd->add_option("--max-memory", args->max_memory,
                  "Refuse a run estimated to hold more memory than this in the simulation process (default 8GiB)")
      ->check(positive_size());
  cmd->add_flag("--no-advice", args->no_advice, "Skip the 'what limits this step' section (it re-simulates variants)");
  add_set_option(cmd, args->sets);
  cmd->callback([args] {
    const auto overrides = parse_sets(args->sets);
    Scenario s = load_scenario_set(args->scenario, overrides);
    std::optional<CalibrationReport> calibrated;
    nlohmann::json calibration_json;
    if (!args->calibration.empty()) {
      const Calibration c = read_calibration(args->calibration);
      calibrated = apply_calibration(s, c);
      calibration_json = calibrated->to_json(c);
    }
    const StepPlan plan = make_step_plan(s);
    SimOptions o;
    o.fidelity = parse_fidelity(args->fidelity);
    o.overlap = !args->no_overlap;
    o.trace_ranks = args->trace_ranks;
    o.progress = true;
    o.max_events = args->max_events;
    o.max_memory_bytes = parse_bytes(args->max_memory);  // checked by positive_size()
    StepResult r = simulate(s, plan, o);
    record_overrides(overrides, r);
    if (!args->no_advice) {
      r.advice = advise(s, r, [&o](const Scenario& variant, const StepPlan& variant_plan) {
        SimOptions quiet = o;
        quiet.progress = false;
        quiet.timeline = false;  // advice reads the variant's step figures only
        return simulate(variant, variant_plan, quiet);
      });
    }
    if (calibrated) r.context["calibration"] = calibration_json;
    const std::string calibration_line = calibrated ? calibrated->summary() + "\n\n" : "";
    std::string text = args->json ? to_json(r).dump(2) + "\n" : calibration_line + render(s, r, o, args->buckets);
    if (!args->trace.empty()) {
      write_file_atomic(args->trace, chrome_trace_json(r, o.trace_ranks));
      const std::string note = fmt::format("Trace {}: {}; --trace-ranks N keeps at most N GPUs.\n", args->trace,
                                           trace_sample_note(r.context.value("world_size", 1), o.trace_ranks));
      if (args->json)
        fmt::print(stderr, "{}", note);  // stdout stays one JSON document
      else
        text += "\n" + note;
    }
    emit(text, args->output);
  });
}

}  // namespace dpsim::app
