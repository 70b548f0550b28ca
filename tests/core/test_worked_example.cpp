// The worked example of DESIGN.md, each figure a check.
#include <catch2/catch.hpp>

#include <string>

#include "../source_dir.hpp"
#include "dpsim/estimate.hpp"
#include "dpsim/load.hpp"

using namespace dpsim;

namespace {
std::string src(const std::string& rel) { return std::string(DPSIM_SOURCE_DIR) + "/" + rel; }
Estimate run(const std::string& scenario) {
  const Scenario s = load_scenario(src(scenario));
  return estimate(s, make_step_plan(s));
}
}  // namespace

TEST_CASE("worked example on 8x H100: parameters, gradients, ring traffic, all-reduce time, memory") {
  const Estimate e = run("scenarios/llama3.1-8b-8xh100.yaml");
  const StepResult& r = e.result;
  CHECK(r.parameters == 8030261248);
  CHECK(static_cast<double>(r.gradient_bytes) == Approx(16.06e9).epsilon(0.001));
  CHECK(r.allreduce_bytes_sent_per_gpu == Approx(28.1e9).epsilon(0.001));
  CHECK(r.allreduce_time_s == Approx(0.0625).epsilon(0.002));  // 28.1e9 / 450e9
  CHECK(r.allreduce_busbw_GBps == Approx(450));
  CHECK(r.model_state_bytes_per_gpu == Approx(128.5e9).epsilon(0.001));
  CHECK_FALSE(r.fits);
  CHECK(r.model_state_bytes_per_gpu > r.gpu_memory_bytes);
  // NCCL's modeled choice for a 16 GB message on NVLS-capable NVSwitch is NVLS/Simple, above the ring's busbw.
  CHECK(r.nccl_algorithm == "nvls");
  CHECK(r.nccl_time_s < r.allreduce_time_s);
}

TEST_CASE("worked example on 8x H200: the model state fits with little left over") {
  const Estimate e = run("scenarios/llama3.1-8b-8xh200.yaml");
  const double left = e.result.gpu_memory_bytes - e.result.model_state_bytes_per_gpu;
  CHECK(left > 0);
  CHECK(left < 0.2 * e.result.gpu_memory_bytes);
  CHECK(e.result.fits);  // with 2048-token activations and bucket-view gradients
}

TEST_CASE("worked example on a PCIe Gen4 box: ~0.88 s at 32 GB/s per direction") {
  const Estimate e = run("scenarios/llama3.1-8b-8xpcie4.yaml");
  CHECK(e.result.allreduce_busbw_GBps == Approx(32));
  CHECK(e.result.allreduce_time_s == Approx(0.878).epsilon(0.002));
}

TEST_CASE("rules of thumb: 24 GB holds ~1.5e9 parameters of mixed-precision Adam state, 80 GB ~5e9") {
  const Estimate small = run("scenarios/gpt2-124m-4xrtx4090.yaml");
  CHECK(small.largest_model_parameters == Approx(1.5e9).epsilon(0.1));
  const Estimate big = run("scenarios/llama3.1-8b-8xh100.yaml");
  CHECK(big.largest_model_parameters == Approx(5e9).epsilon(0.1));
}

TEST_CASE("perfect overlap never exceeds no overlap, and one GPU scales perfectly") {
  const Estimate e = run("scenarios/llama3.1-8b-8xh100.yaml");
  CHECK(e.perfect_overlap_step_s <= e.no_overlap_step_s);
  CHECK(e.result.scaling_efficiency <= 1.0);
  CHECK(e.result.scaling_efficiency > 0.5);
}
