#pragma once
// The shipped scenarios (scenarios/*.yaml), sorted: what tests that must hold for every shipped scenario iterate.
#include <algorithm>
#include <filesystem>
#include <vector>

#include "source_dir.hpp"

namespace dpsim::test {

inline std::vector<std::filesystem::path> shipped_scenarios() {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(DPSIM_SOURCE_DIR) / "scenarios"))
    if (e.path().extension() == ".yaml") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace dpsim::test
