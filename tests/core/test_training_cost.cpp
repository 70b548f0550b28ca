// Cost and time to train (core/training_cost.cpp) against a hand computation from the formula's inputs.
#include <catch2/catch.hpp>

#include <string>

#include "../source_dir.hpp"
#include "dpsim/estimate.hpp"
#include "dpsim/load.hpp"
#include "dpsim/sweep_spec.hpp"
#include "dpsim/training_cost.hpp"

using namespace dpsim;

namespace {

const std::string kScenario = std::string(DPSIM_SOURCE_DIR) + "/scenarios/llama3.1-8b-8xh100.yaml";

// The worked example: 8 GPUs x micro-batch 1 x accumulation 1 x 2048 tokens = 16,384 tokens per step.
Scenario worked_example(const std::vector<Override>& extra) { return load_scenario(kScenario, extra); }

}  // namespace

TEST_CASE("cost per step, per million tokens and to train: price x GPUs x time / 3600") {
  const Scenario s = worked_example({{"cluster.price_per_gpu_hour", "2.5"}, {"training.total_tokens", "1e9"}});
  StepResult r;
  r.step_time_s = 0.5;
  fill_training_cost(s, r);
  CHECK(r.cost.gpus == 8);
  REQUIRE(r.cost.price_per_gpu_hour);
  CHECK(*r.cost.price_per_gpu_hour == 2.5);
  // 2.5 per GPU-hour x 8 GPUs x 0.5 s / 3600 s per hour
  REQUIRE(r.cost.per_step);
  CHECK(*r.cost.per_step == Approx(2.5 * 8 * 0.5 / 3600));
  // that per step / 16,384 tokens x 1e6
  REQUIRE(r.cost.per_million_tokens);
  CHECK(*r.cost.per_million_tokens == Approx(2.5 * 8 * 0.5 / 3600 / 16384 * 1e6));
  // 1e9 / 16,384 = 61,035.16 steps: 61,036 whole steps of 0.5 s
  REQUIRE(r.cost.steps_to_train);
  CHECK(*r.cost.steps_to_train == 61036);
  REQUIRE(r.cost.time_to_train_s);
  CHECK(*r.cost.time_to_train_s == Approx(61036 * 0.5));
  REQUIRE(r.cost.to_train);
  CHECK(*r.cost.to_train == Approx(2.5 * 8 * 61036 * 0.5 / 3600));
}

TEST_CASE("total_samples counts samples per step: GPUs x micro-batch x accumulation") {
  const Scenario s = worked_example({{"training.total_samples", "1000"},
                                     {"training.micro_batch", "2"},
                                     {"training.gradient_accumulation", "3"},
                                     {"training.activations", "false"}});
  StepResult r;
  r.step_time_s = 2.0;
  fill_training_cost(s, r);
  // 8 x 2 x 3 = 48 samples per step: ceil(1000 / 48) = 21 steps of 2 s
  REQUIRE(r.cost.steps_to_train);
  CHECK(*r.cost.steps_to_train == 21);
  CHECK(*r.cost.time_to_train_s == Approx(42.0));
  CHECK_FALSE(r.cost.per_step);  // no price: no cost figures
  CHECK_FALSE(r.cost.to_train);
}

TEST_CASE("without a price or a total nothing is computed, and the JSON has no cost keys") {
  const Scenario s = load_scenario(kScenario);
  const StepResult r = estimate(s, make_step_plan(s)).result;
  CHECK_FALSE(r.cost.price_per_gpu_hour);
  CHECK_FALSE(r.cost.time_to_train_s);
  const nlohmann::json j = to_json(r);
  CHECK_FALSE(j.contains("cost"));
  CHECK_FALSE(j.contains("time_to_train_s"));
}

TEST_CASE("estimate reports the cost of its own step time, and the JSON round trip keeps it") {
  const Scenario s = worked_example({{"cluster.price_per_gpu_hour", "4"}, {"training.total_tokens", "16384e3"}});
  const StepResult r = estimate(s, make_step_plan(s)).result;
  REQUIRE(r.step_time_s > 0);
  REQUIRE(r.cost.per_step);
  CHECK(*r.cost.per_step == Approx(4.0 * 8 * r.step_time_s / 3600));
  CHECK(*r.cost.steps_to_train == 1000);  // 16,384,000 tokens / 16,384 per step
  const nlohmann::json j = to_json(r);
  CHECK(j.at("cost").at("gpus") == 8);
  CHECK(j.at("cost").at("per_step").get<double>() == Approx(*r.cost.per_step));
  CHECK(j.at("cost").at("per_million_tokens").get<double>() == Approx(*r.cost.per_million_tokens));
  CHECK(j.at("cost").at("to_train").get<double>() == Approx(*r.cost.to_train));
  CHECK(j.at("time_to_train_s").get<double>() == Approx(1000 * r.step_time_s));
  const StepResult back = result_from_json(j);
  CHECK(*back.cost.to_train == Approx(*r.cost.to_train));
  CHECK(*back.cost.time_to_train_s == Approx(*r.cost.time_to_train_s));
  CHECK(back.cost.gpus == 8);
}

TEST_CASE("an explicit-layer model has no tokens: cost per step, no cost per million tokens") {
  const Scenario s = load_scenario(std::string(DPSIM_SOURCE_DIR) + "/scenarios/resnet50-8xv100.yaml",
                                   {{"cluster.price_per_gpu_hour", "1"}, {"training.total_samples", "1e6"}});
  const StepResult r = estimate(s, make_step_plan(s)).result;
  CHECK(r.cost.per_step);
  CHECK_FALSE(r.cost.per_million_tokens);
  CHECK(r.cost.to_train);
}
