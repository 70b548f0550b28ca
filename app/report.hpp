#pragma once
// Human-readable sections shared by estimate and predict: scenario, model, memory, all-reduce.
#include <vector>

#include "dpsim/result.hpp"
#include "dpsim/scenario.hpp"
#include "tables.hpp"

namespace dpsim::app {

std::vector<Section> common_sections(const Scenario& scenario, const StepResult& result);
Section step_section(const StepResult& result, const char* title);
// "data 1 x tensor 8 (tensor groups inside a node, ...)": the scenario's parallelism as the result ran it.
std::string parallelism_label(const Scenario& scenario, const StepResult& result);
// "413.62 ms (18.7% of the step)".
std::string share_of_step(double seconds, double step_s);
// Model FLOP/s with the MFU, hardware FLOP/s with the HFU (docs/metrics.md); `note` ends both values.
// Pipeline stages: which stage step.* shows, its bubble and sends, and a row per stage.
void add_pipeline_rows(Section& st, const StepResult& r);
void add_flops_rows(Section& section, const StepResult& result, const std::string& note);
// The scaling-efficiency row's label: with tensor parallelism it is compute / step, and the label says so.
std::string scaling_label(const StepResult& result);
Section allreduce_section(const Scenario& scenario, const StepResult& result);
// Tensor parallelism's collectives by kind and NCCL's choice, and their time in the step.
Section tensor_comm_section(const StepResult& result);
// Sharded steps: the collectives by kind (calls, bytes, traffic per GPU against DDP's).
Section sharded_comm_section(const Scenario& scenario, const StepResult& result);
Section advice_section(const StepResult& result);
// app/report_cost.cpp: shown when the scenario gives a price or a total to train on.
bool has_cost_section(const StepResult& result);
Section cost_section(const Scenario& scenario, const StepResult& result);
// "85.90 GB (80 GiB)": the capacity dpsim compares with, and as data/gpus.yaml states it when that is binary.
std::string gpu_memory_label(const GpuSpec& gpu);

}  // namespace dpsim::app
