#pragma once
// Cost and time to train from the predicted step time: the one place estimate and predict compute them.
#include "dpsim/result.hpp"
#include "dpsim/scenario.hpp"

namespace dpsim {

inline constexpr double kSecondsPerHour = 3600.0;

// Fills result.cost from the scenario's cluster.price_per_gpu_hour and training.total_tokens / total_samples and
// the result's step time; leaves each figure empty when its inputs are not given (or the step time is 0).
void fill_training_cost(const Scenario& scenario, StepResult& result);

}  // namespace dpsim
