#pragma once
// Human-readable sections shared by estimate and predict: scenario, model, memory, all-reduce.
#include <vector>

#include "dpsim/result.hpp"
#include "dpsim/scenario.hpp"
#include "tables.hpp"

namespace dpsim::app {

std::vector<Section> common_sections(const Scenario& scenario, const StepResult& result);
Section step_section(const StepResult& result, const char* title);
// Sharded steps: the collectives by kind (calls, bytes, traffic per GPU against DDP's).
Section sharded_comm_section(const Scenario& scenario, const StepResult& result);
Section advice_section(const StepResult& result);
// app/report_cost.cpp: shown when the scenario gives a price or a total to train on.
bool has_cost_section(const StepResult& result);
Section cost_section(const Scenario& scenario, const StepResult& result);
// "85.90 GB (80 GiB)": the capacity dpsim compares with, and as data/gpus.yaml states it when that is binary.
std::string gpu_memory_label(const GpuSpec& gpu);

}  // namespace dpsim::app
