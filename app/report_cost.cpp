// The "Cost and time to train" section of estimate and predict (figures from core/training_cost.cpp).
#include <fmt/format.h>

#include "dpsim/training_cost.hpp"
#include "dpsim/units.hpp"
#include "report.hpp"

namespace dpsim::app {

namespace {

constexpr double kSecondsPerDay = 24 * kSecondsPerHour;

// An amount in the user's currency (no symbol: the price has none): cents for large sums, 4 digits for small ones.
std::string money(double amount) { return amount >= 1 ? fmt::format("{:.2f}", amount) : fmt::format("{:.4g}", amount); }

}  // namespace

bool has_cost_section(const StepResult& r) { return r.cost.price_per_gpu_hour || r.cost.time_to_train_s; }

Section cost_section(const Scenario& s, const StepResult& r) {
  const TrainingCost& c = r.cost;
  Section out{"Cost and time to train", {}};
  if (c.price_per_gpu_hour)
    out.add("price", fmt::format("{} per GPU-hour x {} GPUs = {} per hour", money(*c.price_per_gpu_hour), c.gpus,
                                 money(*c.price_per_gpu_hour * c.gpus)));
  if (c.per_step) out.add("per step", money(*c.per_step));
  if (c.per_million_tokens) out.add("per million tokens", money(*c.per_million_tokens));
  if (c.time_to_train_s) {
    const std::string total = s.training.total_tokens ? format_count(*s.training.total_tokens) + " tokens"
                                                      : format_count(s.training.total_samples.value_or(0)) + " samples";
    out.add(fmt::format("time to train {}", total),
            fmt::format("{:.2f} days ({} steps of {})", *c.time_to_train_s / kSecondsPerDay,
                        format_count(c.steps_to_train.value_or(0)), format_seconds(r.step_time_s)));
  }
  if (c.to_train) out.add("to train", money(*c.to_train));
  if (!c.price_per_gpu_hour) out.add("cost", "not computed: set cluster.price_per_gpu_hour");
  if (!c.time_to_train_s) out.add("time to train", "not computed: set training.total_tokens or total_samples");
  if (!r.fits) out.add("note", "the configuration does NOT fit in GPU memory: it cannot run as given");
  return out;
}

}  // namespace dpsim::app
