// dpsim measure SCENARIO: run the scenario's StepPlan on real GPUs (CUDA, cuBLASLt, NCCL) and report
// the same result schema as predict, with measured times. --dry-run lists the launches, no GPU.
// Built twice: into dpsim, where the GPU run is handed to dpsim-measure (app/helper.hpp), and into dpsim-measure
// (DPSIM_MEASURE_IN_PROCESS), which runs it.
#include <iostream>

#include <fmt/format.h>

#include "commands.hpp"
#include "dpsim/backend/calibration.hpp"
#include "dpsim/backend/executor.hpp"
#include "dpsim/backend/measure.hpp"
#include "dpsim/backend/shard_buffers.hpp"
#include "dpsim/error.hpp"
#include "dpsim/load.hpp"
#include "dpsim/p2p_batch.hpp"
#include "dpsim/units.hpp"
#include "helper.hpp"
#include "option_checks.hpp"
#include "report.hpp"
#ifdef DPSIM_HAVE_CUDA
#include "dpsim/backend/cuda.hpp"
#endif

namespace dpsim::app {

namespace {

struct MeasureArgs {
  std::string scenario;
  bool json = false;
  std::string output;
  backend::MeasureOptions options;
  bool dry_run = false;
};

#ifdef DPSIM_HAVE_CUDA
std::string render(const Scenario& s, const StepResult& r) {
  auto sections = common_sections(s, r);
  sections.push_back(step_section(r, "Step (measured, median of timed iterations)"));
  Section spread{"Spread over timed iterations (p10 / median / p90)", {}};
  for (auto it = r.spreads.begin(); it != r.spreads.end(); ++it)
    spread.add(it.key(), fmt::format("{} / {} / {}", format_seconds(it.value().at("p10").get<double>()),
                                     format_seconds(it.value().at("median").get<double>()),
                                     format_seconds(it.value().at("p90").get<double>())));
  sections.push_back(std::move(spread));
  Section buckets{"Buckets (ready / start / end, from step begin)", {}};
  const size_t shown = std::min<size_t>(r.buckets.size(), 12);
  for (size_t i = 0; i < shown; ++i) {
    const auto& b = r.buckets[i];
    buckets.add(
        fmt::format("bucket {} ({})", b.index, format_bytes(static_cast<double>(b.bytes))),
        fmt::format("{} / {} / {}", format_seconds(b.ready_s), format_seconds(b.start_s), format_seconds(b.end_s)));
  }
  if (r.buckets.size() > shown) buckets.add("...", fmt::format("{} more in --json", r.buckets.size() - shown));
  sections.push_back(std::move(buckets));
  Section ctx{"Context", {}};
  for (const char* k : {"gpu_name", "gpu_count", "driver_version", "cuda_runtime_version", "nccl_version",
                        "cublas_version", "host", "git_revision", "scenario_hash"})
    if (r.context.contains(k))
      ctx.add(k, r.context.at(k).is_string() ? r.context.at(k).get<std::string>() : r.context.at(k).dump());
  sections.push_back(std::move(ctx));
  if (!r.advice.empty()) sections.push_back(advice_section(r));
  return render_sections(sections);
}
#endif

// The GPU backend posts each batch of a stage's sends and receives as one blocking NCCL group in the step program's
// order: where the stages could wait for each other for ever (core/p2p_batch.cpp), it runs nothing.
void check_transfers(const std::string& scenario, const StepPlan& plan) {
  const StepProgram program = make_step_program(plan);
  const auto deadlock = p2p_deadlock(program, p2p_batches(program));
  if (!deadlock) return;
  throw InputError(fmt::format(
      "{}: parallelism.schedule {} over {} stages: the GPU backend posts each stage's sends and receives as blocking "
      "NCCL groups in the step program's order, and these "
      "would deadlock: {} (the shipped schedules, as Megatron posts them, pass this check)",
      scenario, to_string(plan.pipeline.schedule), plan.pipeline.stages, *deadlock));
}

// Calibration walks one rank's step, and a pipeline stage runs only its own layers.
void check_pipeline_run(const MeasureArgs& a, const StepPlan& plan) {
  if (a.options.calibrate)
    throw InputError(fmt::format(
        "{}: parallelism.pipeline {}: dpsim measure --calibrate times the GEMMs of one rank's step, and a pipeline "
        "stage runs only its own layers; calibrate a scenario of the same model without pipeline stages",
        a.scenario, plan.pipeline.stages));
}

void run_measure(const MeasureArgs& a) {
  const Scenario declared = load_scenario(a.scenario);
  // --gpus N runs the scenario on N GPUs (its data-parallel degree the rest): what the run and the dry run execute.
  const Scenario s = a.options.gpus > 0 ? backend::scenario_on_gpus(a.scenario, declared, a.options.gpus) : declared;
  const StepPlan plan = make_step_plan(s);
  if (a.options.warmup < 1)
    throw InputError("--warmup must be >= 1: iteration 0 (DDP's one-bucket iteration) is never timed");
  if (a.options.iters < 1) throw InputError("--iters must be >= 1");
  if (a.options.watchdog_s <= 0) throw InputError("--watchdog must be > 0 seconds");
  if (s.training.autocast())
    throw InputError(
        fmt::format("{}: the GPU backend runs every kernel in training.param_dtype ({}); autocast "
                    "(training.compute_dtype {}) is predicted, not measured",
                    a.scenario, to_string(s.training.param_dtype), to_string(s.training.compute())));

  if (!s.training.master_weights)
    throw InputError(
        fmt::format("{}: training.master_weights false: the GPU backend's optimizer updates an fp32 "
                    "master copy with fp32 moments; pure 16-bit training is predicted, not measured",
                    a.scenario));
  if (s.training.fp8)
    throw InputError(
        fmt::format("{}: training.fp8: the GPU backend runs its GEMMs with cuBLASLt in "
                    "training.param_dtype ({}); FP8 GEMMs and Transformer Engine's casts are predicted, "
                    "not measured",
                    a.scenario, to_string(s.training.param_dtype)));

  if (plan.dims.context > 1)
    throw InputError(fmt::format(
        "{}: parallelism.context {}: the GPU backend's attention is one kernel over the whole sequence; context "
        "parallelism's ring (Transformer Engine's attention steps beside NCCL sends) is predicted, not measured",
        a.scenario, plan.dims.context));
  if (plan.tp_comm_overlap != TpCommOverlap::none)
    throw InputError(fmt::format(
        "{}: parallelism.tp_comm_overlap: {}: the GPU backend runs the tensor-parallel collectives with NCCL on the "
        "compute stream; their overlap with the GEMMs is predicted, not measured (parallelism.tp_comm_overlap: none)",
        a.scenario, to_string(plan.tp_comm_overlap)));
  // The walker issues each bucket's reduction as the backward completes it; a step that reduces after the whole
  // backward waits for an event (backward_done) the backend does not run.
  if (!plan.overlap_grad_reduce)
    throw InputError(
        fmt::format("{}: ddp.overlap_grad_reduce false: the GPU backend reduces each bucket as the backward completes "
                    "it (PyTorch DDP's hooks), not after the whole backward (Megatron's local DDP); predict and "
                    "estimate model it",
                    a.scenario));
  if (plan.pipeline.stages > 1) check_transfers(a.scenario, plan);
  if (a.dry_run) {
    if (const std::string note = backend::optimizer_impl_note(s); !note.empty())
      std::cerr << "dpsim measure: note: " << note << "\n";
    emit(backend::describe_dry_run(plan, dtype_bytes(s.training.param_dtype), s.ddp.gradient_as_bucket_view), a.output);
    return;
  }
  if (plan.pipeline.stages > 1) check_pipeline_run(a, plan);
#ifndef DPSIM_MEASURE_IN_PROCESS
  // dpsim maps no GPU library: the GPU run is dpsim-measure's, with these same arguments.
  run_helper("dpsim-measure",
#ifdef DPSIM_MEASURE_BUILT
             "dpsim measure runs on GPUs in dpsim-measure (CUDA, cuBLASLt, NCCL), installed next to dpsim, and it "
             "was not found; dpsim measure --dry-run shows the launches without it"
#else
             "this build has no GPU backend (configure with CUDA and NCCL: cmake -DDPSIM_CUDA=ON with CUDAToolkit and "
             "NCCL found, which builds dpsim-measure); dpsim measure --dry-run shows the launches without a GPU"
#endif
  );
#elif !defined(DPSIM_HAVE_CUDA)
#error "dpsim-measure is built with the CUDA backend only"
#else
  if (a.options.calibrate) {
    const backend::Calibration cal =
        backend::calibrate_on_gpus(declared, make_step_plan(declared), a.options, std::cerr);
    std::string out = a.options.calibration_out;
    if (out.empty()) out = fmt::format("calibration-{}.yaml", backend::short_gpu_name(cal.context.at("gpu")));
    backend::write_calibration(out, cal);
    std::cerr << "dpsim measure: wrote " << out << "\n";
    return;
  }
  // The declared scenario: the run records its world beside the one it ran (context.gpus_overridden).
  const StepResult r = backend::measure_on_gpus(declared, make_step_plan(declared), a.options, a.scenario, std::cerr);
  if (!backend::is_output_rank()) return;
  emit(a.json ? to_json(r).dump(2) + "\n" : render(s, r), a.output);
#endif
}

}  // namespace

void register_measure(CLI::App& app) {
  auto a = std::make_shared<MeasureArgs>();
  auto* cmd =
      app.add_subcommand("measure", "Run the scenario on real GPUs (CUDA, cuBLASLt, NCCL) and report measured times");
  cmd->add_option("SCENARIO", a->scenario, "Scenario YAML file (scenarios/*.yaml)")->required();
  cmd->add_flag("--json", a->json, "Print the result JSON (same keys as predict) instead of a table");
  cmd->add_option("-o,--output", a->output, "Write to this file (atomically) instead of stdout")->check(non_empty());
  cmd->add_option("--gpus", a->options.gpus,
                  "Use N GPUs of this machine instead of the scenario's count (recorded in the result)")
      ->check(whole_number_in(1, 1 << 20));
  cmd->add_option("--warmup", a->options.warmup, "Untimed iterations (>= 1; iteration 0 is DDP's special one)")
      ->default_val(3)
      ->check(whole_number_in(1, 1 << 20));
  cmd->add_option("--iters", a->options.iters, "Timed iterations (median, p10, p90)")
      ->default_val(10)
      ->check(whole_number_in(1, 1 << 20));
  cmd->add_option("--watchdog", a->options.watchdog_s,
                  "Seconds before a collective counts as hung: abort and name the bucket")
      ->default_val(300)
      ->check(finite_positive());
  auto* cal = cmd->add_flag(
      "--calibrate", a->options.calibrate,
      "Microbenchmarks (GEMM per shape, HBM copy, optimizer, all-reduce sweep 8 B..4 GiB) -> calibration YAML");
  cmd->add_option("--calibration-out", a->options.calibration_out,
                  "Calibration file to write (default calibration-<gpu>.yaml)")
      ->needs(cal);
  cmd->add_flag("--dry-run", a->dry_run, "Print the launch sequence of one step per GPU; needs no GPU");
  cmd->callback([a] { run_measure(*a); });
}

}  // namespace dpsim::app
