// dpsim estimate SCENARIO: the closed-form answer, instant.
#include <fmt/format.h>

#include "commands.hpp"
#include "dpsim/advice.hpp"
#include "dpsim/calibration.hpp"
#include "dpsim/cost.hpp"
#include "dpsim/estimate.hpp"
#include "dpsim/load.hpp"
#include "dpsim/trainable.hpp"
#include "dpsim/units.hpp"
#include "option_checks.hpp"
#include "report.hpp"
#include "set_option.hpp"

namespace dpsim::app {

namespace {

struct EstimateArgs {
  std::string scenario;
  std::string calibration;
  bool json = false;
  std::string output;
  std::vector<std::string> sets;
};

std::string bracket(const StepResult& r, const std::string& lower, const std::string& none) {
  return fmt::format("{} ({}) to {} (no-overlap bound)", lower, lower_bound_label(r), none);
}

// The closed form brackets the step; it does not predict where in the bracket the step falls.
Section bounds_section(const StepResult& r) {
  const StepBound& lo = r.bounds->perfect_overlap;
  const StepBound& hi = r.bounds->no_overlap;
  Section st{r.sharding == "none" ? "Step bounds (closed form; dpsim predict simulates the overlap between them)"
                                  : "Step (closed form: the program walked with a clock per stream; dpsim predict "
                                    "simulates it)",
             {}};
  st.add("forward", format_seconds(r.forward_s));
  st.add("backward", format_seconds(r.backward_s));
  st.add("optimizer", format_seconds(r.optimizer_s));
  if (r.tensor_parallel > 1)
    st.add("tensor-parallel communication",
           fmt::format("{} ({:.1f}% of the step; on the compute stream: in both bounds)",
                       format_seconds(r.tensor_comm_s), 100.0 * r.tensor_comm_s / lo.step_time_s));
  add_pipeline_rows(st, r);
  st.add("communication busy", format_seconds(r.comm_busy_s));
  st.add("step time", bracket(r, format_seconds(lo.step_time_s), format_seconds(hi.step_time_s)));
  st.add("exposed communication", bracket(r, format_seconds(lo.exposed_comm_s), format_seconds(hi.exposed_comm_s)));
  st.add("throughput", bracket(r, fmt::format("{:.1f} samples/s", lo.samples_per_s),
                               fmt::format("{:.1f} samples/s", hi.samples_per_s)));
  add_flops_rows(st, r, fmt::format(" ({})", lower_bound_label(r)));
  st.add(scaling_label(r), bracket(r, fmt::format("{:.1f}%", 100.0 * lo.scaling_efficiency),
                                   fmt::format("{:.1f}%", 100.0 * hi.scaling_efficiency)));
  return st;
}

// Where the compute time goes, by op kind (a kind with no time is left out): each kind's time and share of the
// compute, and the rate it runs at.
void add_compute_by_kind(Section& comp, const ComputeByKind& c, const ComputeModel& cm) {
  const double total = c.total_s();
  if (!(total > 0)) return;
  const auto share = [&](double seconds) {
    return fmt::format("{} ({:.0f}%)", format_seconds(seconds), 100 * seconds / total);
  };
  const auto flops = [&](const char* label, double seconds, double executed, const char* peak) {
    if (!(seconds > 0)) return;
    const double rate = executed / seconds;
    comp.add(label, fmt::format("{}, {:.0f} TFLOP/s executed ({:.0f}% of {})", share(seconds), rate / 1e12,
                                100 * rate / cm.peak_flops_per_s, peak));
  };
  // Under training.fp8 the linear layers' GEMMs run against the FP8 peak: their share is still of the 16-bit one.
  flops("time in GEMMs", c.gemm_s, c.gemm_flops, cm.fp8_gemms ? "the 16-bit peak, most of them in FP8" : "peak");
  flops("time in attention", c.attention_s, c.attention_flops, "peak");
  if (c.memory_bound_s > 0)
    comp.add("time in memory-bound ops",
             fmt::format("{}, {} at {:.2f} TB/s", share(c.memory_bound_s), format_bytes(c.memory_bound_bytes),
                         c.memory_bound_bytes / c.memory_bound_s / 1e12));
  if (c.optimizer_s > 0) comp.add("time in the optimizer step", share(c.optimizer_s));
}

std::string render(const Scenario& s, const Estimate& e) {
  auto sections = common_sections(s, e.result);
  Section fit{"Largest model that fits", {}};
  fit.add(fmt::format("{} with {}", s.topology.gpu.name, optimizer_state_label(s.training)),
          fmt::format("{:.2f}e9 parameters{} (model state only{})", e.largest_model_parameters / 1e9,
                      e.result.tensor_parallel > 1 ? " held per GPU" : "",
                      s.parallelism.sharding == Sharding::none ? "" : ", " + s.parallelism.sharding_as_written));
  sections.push_back(std::move(fit));
  const ComputeModel cm = compute_model(s);
  Section comp{"Compute", {}};
  comp.add("GPU rate", fmt::format("{:.0f} TFLOP/s {} peak", cm.peak_flops_per_s / 1e12,
                                   s.training.tf32 ? "tf32" : to_string(s.training.compute())));
  comp.add("GEMMs",
           fmt::format("at most x {:.2f} of peak, per shape (tile and wave quantization, {:.1f} us per kernel)",
                       cm.gemm_efficiency, cm.gemm_fixed_time_s * 1e6));
  if (cm.fp8_gemms)
    comp.add("FP8 GEMMs (training.fp8)",
             fmt::format("the linear layers' at {:.0f} TFLOP/s fp8 peak x {:.2f}, with their casts",
                         cm.fp8_gemms->peak_flops_per_s / 1e12, cm.fp8_gemms->gemm_efficiency));
  comp.add("attention", fmt::format("{}: x {:.2f} of peak", to_string(s.training.attention), cm.attention_efficiency));
  if (e.result.compute_by_kind) add_compute_by_kind(comp, *e.result.compute_by_kind, cm);
  comp.add("forward + backward + optimizer", format_seconds(e.compute_s));
  sections.push_back(std::move(comp));
  sections.push_back(bounds_section(e.result));
  if (has_cost_section(e.result)) sections.push_back(cost_section(s, e.result));
  if (!e.result.advice.empty()) sections.push_back(advice_section(e.result));
  return render_sections(sections);
}

}  // namespace

void register_estimate(CLI::App& app) {
  auto args = std::make_shared<EstimateArgs>();
  auto* cmd = app.add_subcommand("estimate", "Closed-form estimate: memory fit, all-reduce time, step time bounds");
  cmd->add_option("SCENARIO", args->scenario, "Scenario YAML file (scenarios/*.yaml)")->required();
  cmd->add_flag("--json", args->json, "Print the result JSON (keys in docs/metrics.md) instead of a table");
  cmd->add_option("--calibration", args->calibration,
                  "Calibration YAML from dpsim calibrate (fitted from nccl-tests logs or measure --calibrate)")
      ->check(non_empty());
  cmd->add_option("-o,--output", args->output, "Write to this file (atomically) instead of stdout")->check(non_empty());
  add_set_option(cmd, args->sets);
  cmd->callback([args] {
    const auto overrides = parse_sets(args->sets);
    Scenario s = load_scenario_set(args->scenario, overrides);
    if (!args->calibration.empty()) apply_calibration(s, read_calibration(args->calibration));
    Estimate e = estimate(s, make_step_plan(s));
    record_overrides(overrides, e.result);
    e.result.advice = advise(s, e.result, [](const Scenario& v, const StepPlan& p) { return estimate(v, p).result; });
    emit(args->json ? to_json(e.result).dump(2) + "\n" : render(s, e), args->output);
  });
}

}  // namespace dpsim::app
