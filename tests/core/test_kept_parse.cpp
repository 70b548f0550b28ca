// keep_parsed_files_of (a sweep's parent parses the base scenario's files once for the workers it forks): a kept
// parse loads the same scenario, is shared by every read-only load (a worker runs many points), a point's overrides
// never reach a later load, a file changed since is parsed again, and errors keep their file and line.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "../source_dir.hpp"
#include "dpsim/error.hpp"
#include "dpsim/input_file.hpp"
#include "dpsim/load.hpp"
#include "dpsim/plan.hpp"
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

TEST_CASE("points one after another share the kept parse: one point's overrides never reach a later load") {
  const fs::path f = write_scenario("kept-once", "1");
  const Scenario plain = load_scenario(f);
  keep_parsed_files_of(f);
  for (int round = 0; round < 2; ++round) {
    const Scenario point = load_scenario(f, {{"training.micro_batch", "4"}, {"cluster.gpus_per_node", "4"}});
    const Scenario other = load_scenario(f, {{"training.sequence_length", "1024"}});
    const Scenario after = load_scenario(f);
    CHECK(point.training.micro_batch == 4);
    CHECK(point.topology.gpus_per_node == 4);
    CHECK(other.training.micro_batch == 1);
    CHECK(other.topology.gpus_per_node == 8);
    CHECK(other.training.sequence_length == 1024);
    CHECK(after.training.micro_batch == 1);
    CHECK(after.training.sequence_length == 2048);
    CHECK(after.name == plain.name);
    CHECK(after.topology.gpu.name == plain.topology.gpu.name);
    CHECK(after.model.name == plain.model.name);
    CHECK(after.topology.nodes == plain.topology.nodes);
  }
}

TEST_CASE("each point notes every input it uses, whatever its process read before (kept parses, data tables)") {
  const fs::path f = write_scenario("kept-inputs", "1");
  keep_parsed_files_of(f);
  std::map<std::string, std::string> first;
  for (int round = 0; round < 2; ++round) {
    InputLog log;
    make_step_plan(load_scenario(f, {{"training.micro_batch", "2"}}));  // the plan reads data/optimizers.yaml once
    if (round == 0) first = log.files();
    CHECK(log.files() == first);
  }
  CHECK(std::any_of(first.begin(), first.end(),
                    [](const auto& input) { return fs::path(input.first).filename() == "optimizers.yaml"; }));
  CHECK(first.size() > 4);  // the scenario, its model, its GPU, nccl.yaml, optimizers.yaml...
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

// One parse per file: the structure checks (duplicate keys, keys without a value, one document) run on the parsed
// tree, and the text is parsed a second time only where the tree may not hold all of it (a document marker after
// content, a column-0 line that starts no root entry: tests/core/test_yaml_structure.cpp).
TEST_CASE("document markers around one document are read; what follows `...` is a second document") {
  const fs::path f = write_scenario("markers", "3");
  const std::string body = read_input_file(f);
  std::ofstream(f) << "# a comment\n%YAML 1.2\n---\n" << body << "...\n# trailing comment\n";
  CHECK(load_scenario(f).training.micro_batch == 3);
  std::ofstream(f) << "--- # one document\n" << body;
  CHECK(load_scenario(f).training.micro_batch == 3);
  std::ofstream(f) << body << "...\nname: again\n";
  CHECK(load_error(f) == f.string() +
                             ": holds a second YAML document (after ---), which dpsim would not read; one document "
                             "per file");
}

TEST_CASE("a key without a value and a duplicate key are found through aliases, once, in bounded time") {
  const fs::path dir = fs::temp_directory_path() / "dpsim-kept-parse";
  fs::create_directories(dir);
  const fs::path f = dir / "aliases.yaml";
  {
    std::ofstream out(f);
    out << "notes:\n  a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
    for (char c = 'b'; c <= 'q'; ++c) {  // 10^16 values once expanded: a walk must not expand them
      out << "  " << c << ": &" << c << " [";
      for (int i = 0; i < 10; ++i) out << (i ? ", " : "") << "*" << static_cast<char>(c - 1);
      out << "]\n";
    }
    out << "  r: &r {x: 1, x: 2}\n  s: *r\n";
  }
  CHECK(load_error(f) == f.string() +
                             ":19: notes.r.x: duplicate key \"x\" (first at line 19); YAML would keep "
                             "only one of them");
}
