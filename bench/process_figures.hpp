#pragma once
// Process-level figures of the benchmark: whole dpsim commands run as a user runs them (a new process each, its
// start included), and a sweep's points per hour.
#include <filesystem>
#include <string>
#include <vector>

namespace dpsim::bench {

struct ProcessRun {
  double wall_s = 0;         // median over the runs
  double cpu_s = 0;          // median over the runs: user + system, the process and the children it waited for
  double max_rss_bytes = 0;  // the largest over the runs (the process and what it exec'd into)
  int failed = 0;            // runs that did not exit 0
};

// Runs `argv` `runs` times (stdout and stderr to /dev/null).
ProcessRun run_process(const std::vector<std::string>& argv, int runs);

// Prints one line per command (wall, CPU, peak RSS): `dpsim --version`, `dpsim estimate` and `dpsim predict` of the
// shipped Llama 3.1 8B 8-GPU scenario, and `dpsim predict` of its 1,024-GPU scenario at 256 GPUs (`root`: the source
// tree).
void print_process_figures(const std::filesystem::path& dpsim, const std::filesystem::path& root, int runs);

// Runs `dpsim sweep SWEEP --limit points -j jobs` into a temporary directory and prints points per hour.
// Returns false when the sweep failed or recorded another number of rows.
bool print_sweep_rate(const std::filesystem::path& dpsim, const std::filesystem::path& sweep, int points, int jobs);

}  // namespace dpsim::bench
