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
                          "/buckets"}) {
    INFO(key);
    CHECK(j.contains(nlohmann::json::json_pointer(key)));
  }
  const StepResult back = result_from_json(j);
  CHECK(to_json(back) == j);
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
