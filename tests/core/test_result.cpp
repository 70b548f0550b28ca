#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "../source_dir.hpp"
#include "dpsim/error.hpp"
#include "dpsim/estimate.hpp"
#include "dpsim/load.hpp"

using namespace dpsim;

TEST_CASE("a result survives a JSON round trip with the DESIGN.md keys") {
  const Scenario s = load_scenario(std::string(DPSIM_SOURCE_DIR) + "/scenarios/llama3.1-8b-8xh100.yaml");
  const StepResult r = estimate(s, make_step_plan(s)).result;
  const nlohmann::json j = to_json(r);
  for (const char* key : {"/schema_version",
                          "/scenario",
                          "/context",
                          "/model/parameters",
                          "/model/gradient_bytes",
                          "/memory/model_state_bytes_per_gpu",
                          "/memory/activation_bytes_per_gpu",
                          "/memory/gpu_memory_bytes",
                          "/memory/fits",
                          "/allreduce/bytes_sent_per_gpu",
                          "/allreduce/time_s",
                          "/allreduce/busbw_GBps",
                          "/allreduce/algorithm",
                          "/step/time_s",
                          "/step/forward_s",
                          "/step/backward_s",
                          "/step/exposed_comm_s",
                          "/step/optimizer_s",
                          "/throughput/samples_per_s",
                          "/throughput/tokens_per_s",
                          "/scaling_efficiency",
                          "/compute/gemm_s",
                          "/compute/memory_bound_bytes",
                          "/buckets"}) {
    INFO(key);
    CHECK(j.contains(nlohmann::json::json_pointer(key)));
  }
  const StepResult back = result_from_json(j);
  CHECK(to_json(back) == j);
}

// estimate's compute by op kind: the kinds add up to the compute of the step (the reported stage's with pipeline
// stages), and their FLOPs to the hardware FLOPs the throughput is counted from.
TEST_CASE("estimate's compute by kind adds up to the step's compute and its FLOPs") {
  for (const char* name : {"llama3.1-8b-8xh100", "llama3.1-8b-fsdp-8xh100", "megatron-8.3b-8xv100-tp8",
                           "llama3.1-70b-tp8-pp2-64xh100", "resnet50-8xv100", "llama3.1-8b-lora-8xl40s"}) {
    INFO(name);
    const Scenario s = load_scenario(std::string(DPSIM_SOURCE_DIR) + "/scenarios/" + name + ".yaml");
    const StepResult r = estimate(s, make_step_plan(s)).result;
    REQUIRE(r.compute_by_kind);
    const ComputeByKind& c = *r.compute_by_kind;
    CHECK(c.total_s() == Approx(r.forward_s + r.backward_s + r.optimizer_s).epsilon(1e-9));
    // Pipeline stages: the throughput counts the stages' mean, the breakdown the stage with the most compute.
    const double per_gpu = r.hardware_flops_per_s_per_gpu * r.step_time_s;
    if (r.stages.empty())
      CHECK(c.gemm_flops + c.attention_flops == Approx(per_gpu).epsilon(1e-9));
    else
      CHECK(c.gemm_flops + c.attention_flops >= per_gpu);
    CHECK(c.gemm_s > 0);
    CHECK(c.memory_bound_bytes / c.memory_bound_s <= s.topology.gpu.memory_bandwidth_bytes_per_s);
  }
}

TEST_CASE("a result missing a key is refused with the key's name") {
  const Scenario s = load_scenario(std::string(DPSIM_SOURCE_DIR) + "/scenarios/llama3.1-8b-8xh100.yaml");
  nlohmann::json j = to_json(estimate(s, make_step_plan(s)).result);
  j["step"].erase("time_s");
  CHECK_THROWS_WITH(result_from_json(j), Catch::Contains("step.time_s"));
}

TEST_CASE("atomic writes leave no temporary file and refuse an unwritable path") {
  const auto dir = std::filesystem::temp_directory_path() / "dpsim-atomic-test";
  std::filesystem::create_directories(dir);
  write_file_atomic(dir / "out.json", "{}\n");
  std::ifstream in(dir / "out.json");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  CHECK(text == "{}\n");
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++files;
  CHECK(files == 1);
  CHECK_THROWS_AS(write_file_atomic("/nonexistent-dir/out.json", "x"), RuntimeError);
  std::filesystem::remove_all(dir);
}
