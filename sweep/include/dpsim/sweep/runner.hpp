#pragma once
// Runs a sweep: every point in its own process (SimGrid's engine is one per process), `jobs` at a
// time. Each finished point is appended at once to DIR/results.jsonl and DIR/results.csv, one write per
// row, so an interrupted sweep loses only the points in flight, and those are not recorded: `resume`
// runs them again and skips the points recorded, after checking that they belong to this sweep (same
// axes, same input files). A point that runs past `point_timeout_s` is killed and recorded as an error.
// A lock on DIR refuses a second sweep writing into it. When the sweep completes, both files are
// rewritten in point order: the same sweep gives the same bytes.
#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "dpsim/sweep_spec.hpp"

namespace dpsim {

// A point's time limit unless --point-timeout says otherwise: far above any shipped scenario's point (the
// 16,384-GPU predict takes seconds), low enough that a hung point does not stall a sweep for a day.
inline constexpr double kDefaultPointTimeout_s = 3600;

struct SweepOptions {
  int jobs = 1;
  std::filesystem::path out_dir;
  bool resume = false;
  int shard_index = 0;  // run points with index % shard_count == shard_index
  int shard_count = 1;
  std::set<int64_t> recorded_elsewhere;  // points already in another directory's results: skipped, as resumed
  int64_t limit = -1;                    // run at most this many points (benchmarks); -1: all
  bool progress = true;
  double point_timeout_s = kDefaultPointTimeout_s;
  bool owns_dir = true;  // lock out_dir and check resumed rows (false: an MPI rank's share, checked by rank 0)
};

struct SweepSummary {
  int64_t total = 0;    // points in this shard
  int64_t ran = 0;      // points run now
  int64_t skipped = 0;  // already in results (resume)
  int64_t failed = 0;
  int64_t unfinished = 0;  // stopped from outside before they finished: not recorded, run by --resume
  bool interrupted = false;
  double wall_s = 0;
};

// Throws RuntimeError when a point could not be recorded (disk full, a worker that could not start or
// write its result): the points recorded before are kept for --resume; InputError when --resume finds
// rows of another sweep.
SweepSummary run_sweep(const SweepSpec& sweep, const SweepOptions& options);

// Throws InputError unless 0 <= shard_index < shard_count.
void check_shard(const SweepOptions& options);

// Narrows options' slice I/N to rank `rank` of `ranks`: slice (I + N*rank)/(N*ranks). The ranks' slices are
// disjoint and together hold exactly the points of I/N.
void split_shard(SweepOptions& options, int rank, int ranks);

// One point, evaluated in this process: its JSON line {"point", "axes", "result"} or {"point", "axes", "error"},
// and its CSV row (rendered here, from the JSON before it is written: the sweep's parent parses no row).
struct PointRow {
  std::string json_line;
  std::string csv_row;
  bool ok = false;  // the line holds a result, not an error
};
PointRow evaluate_point(const SweepSpec& sweep, int64_t index);

// The CSV columns: point, one per axis, status, error, then the result figures.
std::vector<std::string> csv_header(const SweepSpec& sweep);
std::string csv_row(const SweepSpec& sweep, const std::string& json_line);

}  // namespace dpsim
