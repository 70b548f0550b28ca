#pragma once
// data/nccl.yaml with one piece of its text replaced, loaded as dpsim loads it (tests of the file's keys).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "../source_dir.hpp"
#include "dpsim/load.hpp"

namespace dpsim::test {

// Replaces the first `from` of the shipped data/nccl.yaml by `to` and loads the result (its errors propagate; the
// temporary file is removed either way).
inline NcclModel load_nccl_with(const std::string& from, const std::string& to) {
  std::ifstream in(std::string(DPSIM_SOURCE_DIR) + "/data/nccl.yaml");
  std::stringstream text;
  text << in.rdbuf();
  std::string yaml = text.str();
  const auto at = yaml.find(from);
  REQUIRE(at != std::string::npos);
  yaml.replace(at, from.size(), to);
  const auto file = std::filesystem::temp_directory_path() / "dpsim-nccl-edited.yaml";
  std::ofstream(file) << yaml;
  struct Remove {
    std::filesystem::path p;
    ~Remove() { std::filesystem::remove(p); }
  } remove{file};
  return load_nccl(file);
}

}  // namespace dpsim::test
