#pragma once
// The closed-form answer: instant, no simulation. Perfect and no overlap bracket the real step.
#include "dpsim/plan.hpp"
#include "dpsim/result.hpp"
#include "dpsim/scenario.hpp"

namespace dpsim {

struct Estimate {
  StepResult result;     // step.time_s = perfect-overlap estimate
  double compute_s = 0;  // forward + backward (+ accumulation) + optimizer
  double perfect_overlap_step_s = 0;
  double no_overlap_step_s = 0;
  double single_gpu_step_s = 0;
  double largest_model_parameters = 0;  // of this precision/optimizer that fits this GPU (state only)
};

Estimate estimate(const Scenario& scenario, const StepPlan& plan);

struct StepProgram;

// Fill the figures every mode shares: parameters, memory, single-message all-reduce. `program` is the step the
// mode runs (its process groups are the NCCL communicators counted in memory); the three-argument form builds it.
void fill_common(const Scenario& scenario, const StepPlan& plan, const StepProgram& program, StepResult& result);
void fill_common(const Scenario& scenario, const StepPlan& plan, StepResult& result);

// The throughput of a step of result.step_time_s: samples, tokens, and model FLOP/s per GPU with the MFU.
void fill_throughput(const StepPlan& plan, StepResult& result);

// With pipeline stages: step.time_s the last stage's end, step.* the stage with the most compute (result.stages[] as
// the executor filled them), each stage's memory need.
void report_stages(const StepPlan& plan, StepResult& result);

}  // namespace dpsim
