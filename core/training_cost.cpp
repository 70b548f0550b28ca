#include "dpsim/training_cost.hpp"

#include <cmath>

namespace dpsim {

void fill_training_cost(const Scenario& s, StepResult& r) {
  TrainingCost& c = r.cost;
  c = TrainingCost{};
  c.gpus = s.world_size();
  if (!(r.step_time_s > 0)) return;
  const Training& t = s.training;
  const auto samples_per_step = static_cast<double>(s.samples_per_step());
  const double tokens_per_step = samples_per_step * static_cast<double>(t.sequence_length);
  const bool has_tokens = s.model.transformer.has_value();
  if (s.price_per_gpu_hour) {
    c.price_per_gpu_hour = *s.price_per_gpu_hour;
    c.per_step = *s.price_per_gpu_hour * c.gpus * r.step_time_s / kSecondsPerHour;
    if (has_tokens) c.per_million_tokens = *c.per_step / tokens_per_step * 1e6;
  }
  if (t.total_tokens) c.steps_to_train = std::ceil(*t.total_tokens / tokens_per_step);
  if (t.total_samples) c.steps_to_train = std::ceil(*t.total_samples / samples_per_step);
  if (!c.steps_to_train) return;
  c.time_to_train_s = *c.steps_to_train * r.step_time_s;
  if (c.per_step) c.to_train = *c.per_step * *c.steps_to_train;
}

}  // namespace dpsim
