#pragma once
// Sweeps: a base scenario plus axes of overrides (any scenario key path), expanded as a full grid or
// zipped. Overrides are applied to the YAML tree before it is parsed, so a sweep value is checked
// exactly like the same value written in a scenario file.
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "dpsim/scenario.hpp"

namespace dpsim {

struct Override {
  std::string key_path;  // "cluster.nodes", "ddp.bucket_cap", "training.micro_batch"
  std::string value;     // YAML text: "16", "100MiB", "h100-ib-cluster"
};

Scenario load_scenario(const std::filesystem::path& file, const std::vector<Override>& overrides);

struct SweepAxis {
  std::string key_path;
  std::vector<std::string> values;  // YAML text of each value
};

enum class SweepMode { grid, zip };

struct SweepSpec {
  std::string name;
  std::string file;
  std::filesystem::path base;  // scenario file, resolved
  SweepMode mode = SweepMode::grid;
  std::string command = "predict";  // predict | estimate
  std::vector<SweepAxis> axes;
  double point_count() const;  // a double: a 10^9-point grid must be counted before it is refused
};

inline constexpr double kMaxSweepPoints = 1e6;

SweepSpec load_sweep(const std::filesystem::path& file);

// The overrides of point `index` (grid: the first axis varies slowest).
std::vector<Override> sweep_point(const SweepSpec& sweep, int64_t index);

}  // namespace dpsim
