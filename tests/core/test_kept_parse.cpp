// keep_parsed_files_of (a sweep's parent parses the base scenario's files once for the points it forks): a kept
// parse loads the same scenario, is taken once per process (a point's overrides never reach a later load), a file
// changed since is parsed again, and errors keep their file and line.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "../source_dir.hpp"
#include "dpsim/error.hpp"
#include "dpsim/load.hpp"
#include "dpsim/sweep_spec.hpp"

using namespace dpsim;
namespace fs = std::filesystem;

namespace {

fs::path write_scenario(const std::string& name, const std::string& micro_batch) {
  const fs::path dir = fs::temp_directory_path() / "dpsim-kept-parse";
  fs::create_directories(dir);
  const fs::path f = dir / (name + ".yaml");
  std::ofstream(f) << "name: " << name << "\nmodel: " << DPSIM_SOURCE_DIR << "/models/llama-3.1-8b.yaml\n"
                   << "training:\n  micro_batch: " << micro_batch << "\n  sequence_length: 2048\n"
                   << "cluster:\n  topology: h100-8x-nvswitch\n  nodes: 1\n  gpus_per_node: 8\n";
  return f;
}

std::string load_error(const fs::path& f) {
  try {
    load_scenario(f);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a kept parse is taken once: a point's overrides do not reach a later load") {
  const fs::path f = write_scenario("kept-once", "1");
  const Scenario plain = load_scenario(f);
  keep_parsed_files_of(f);
  const Scenario point = load_scenario(f, {{"training.micro_batch", "4"}});
  const Scenario after = load_scenario(f);
  CHECK(point.training.micro_batch == 4);
  CHECK(after.training.micro_batch == 1);
  CHECK(after.name == plain.name);
  CHECK(after.topology.gpu.name == plain.topology.gpu.name);
  CHECK(after.model.name == plain.model.name);
  CHECK(after.topology.nodes == plain.topology.nodes);
}

TEST_CASE("a file changed since it was kept is parsed again") {
  const fs::path f = write_scenario("kept-changed", "1");
  keep_parsed_files_of(f);
  write_scenario("kept-changed", "2");
  CHECK(load_scenario(f).training.micro_batch == 2);
}

TEST_CASE("an error in a kept file names its file and line as a fresh parse does") {
  const fs::path f = write_scenario("kept-error", "zero");
  keep_parsed_files_of(f);  // the error is the points' to report
  const std::string kept = load_error(f), fresh = load_error(f);
  CHECK(kept.find(f.string() + ":4: training.micro_batch:") != std::string::npos);
  CHECK(kept == fresh);
}
