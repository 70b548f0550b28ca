// The MPI layer around run_sweep: slices, the broadcast of recorded points, the gather of rows to rank 0.
// MPI_Init comes before run_sweep forks its point workers; the workers never call MPI and leave by _exit.
#include "dpsim/sweep/ranks.hpp"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "dpsim/error.hpp"
#include "dpsim/launcher.hpp"
#include "results.hpp"

#ifdef DPSIM_MPI
#include <mpi.h>
#endif

namespace dpsim {

namespace fs = std::filesystem;

namespace {

#ifdef DPSIM_MPI

[[noreturn]] void abort_all(int rank, const std::string& what, int code) {
  fmt::print(stderr, "dpsim sweep: rank {}: {}; stopping every rank\n", rank, what);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

// Rank 0: the output directory locked and made ready; the points already recorded there (--resume), by index.
std::map<int64_t, std::string> prepare(const SweepSpec& sweep, const fs::path& dir, bool resume,
                                       std::optional<DirLock>& lock) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw RuntimeError(fmt::format("cannot create {}: {}", dir.string(), ec.message()));
  lock.emplace(dir);
  if (!resume) {
    fs::remove(dir / "results.jsonl", ec);
    fs::remove(dir / "results.csv", ec);
    fs::remove_all(dir / ".ranks", ec);
    return {};
  }
  auto known = read_results(dir / "results.jsonl");
  if (fs::is_directory(dir / ".ranks", ec)) {
    for (const auto& d : fs::directory_iterator(dir / ".ranks"))  // rows of an interrupted run's ranks
      for (auto& [index, line] : read_results(d.path() / "results.jsonl")) known.emplace(index, std::move(line));
  }
  check_recorded(sweep, dir / "results.jsonl", known);
  return known;
}

std::set<int64_t> broadcast_indices(const std::map<int64_t, std::string>& known) {
  std::vector<int64_t> v;
  for (const auto& [index, line] : known) v.push_back(index);
  long long n = static_cast<long long>(v.size());
  MPI_Bcast(&n, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  v.resize(static_cast<size_t>(n));
  MPI_Bcast(v.data(), static_cast<int>(n), MPI_INT64_T, 0, MPI_COMM_WORLD);
  return {v.begin(), v.end()};
}

// Every rank's text, concatenated in rank order, on rank 0 (empty elsewhere).
std::string gather_text(const std::string& mine, int rank, int ranks) {
  if (mine.size() > static_cast<size_t>(INT_MAX)) abort_all(rank, "more than 2 GB of result rows on one rank", 1);
  int n = static_cast<int>(mine.size());
  std::vector<int> sizes(static_cast<size_t>(rank == 0 ? ranks : 0)), offsets;
  MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  long long total = 0;
  for (int s : sizes) {
    offsets.push_back(static_cast<int>(total));
    total += s;
    if (total > INT_MAX) abort_all(rank, "more than 2 GB of result rows in all", 1);
  }
  std::string all(static_cast<size_t>(total), '\0');
  MPI_Gatherv(mine.data(), n, MPI_CHAR, all.data(), sizes.data(), offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  return all;
}

SweepSummary add_up(const SweepSummary& s) {
  SweepSummary all = s;
  int64_t counts[5] = {s.total, s.ran, s.skipped, s.failed, s.unfinished};
  MPI_Allreduce(MPI_IN_PLACE, counts, 5, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  all.total = counts[0], all.ran = counts[1], all.skipped = counts[2], all.failed = counts[3];
  all.unfinished = counts[4];
  int interrupted = s.interrupted ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &interrupted, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  all.interrupted = interrupted != 0;
  MPI_Allreduce(MPI_IN_PLACE, &all.wall_s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return all;
}

LaunchedSweep run_one_rank(const SweepSpec& sweep, const SweepOptions& opt, int rank, int ranks) {
  std::optional<DirLock> lock;
  auto known = rank == 0 ? prepare(sweep, opt.out_dir, opt.resume, lock) : std::map<int64_t, std::string>{};
  SweepOptions mine = opt;
  mine.owns_dir = false;
  mine.recorded_elsewhere = broadcast_indices(known);
  mine.out_dir = opt.out_dir / ".ranks" / std::to_string(rank);
  mine.progress = opt.progress && rank == 0;  // one progress line: rank 0's share
  split_shard(mine, rank, ranks);
  const SweepSummary own = run_sweep(sweep, mine);
  std::string rows;
  for (const auto& [index, line] : read_results(mine.out_dir / "results.jsonl")) rows += line + "\n";
  const std::string all_rows = gather_text(rows, rank, ranks);
  LaunchedSweep out{add_up(own), rank, ranks};
  if (rank == 0) {
    for (auto& [index, line] : parse_results(all_rows, "the ranks' rows")) known[index] = std::move(line);
    write_results(sweep, opt.out_dir, known);
  }
  MPI_Barrier(MPI_COMM_WORLD);  // DIR/results.* hold every row: the ranks' own copies can go
  std::error_code ec;
  fs::remove_all(mine.out_dir, ec);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) fs::remove(opt.out_dir / ".ranks", ec);
  return out;
}

LaunchedSweep run_ranks(const SweepSpec& sweep, const SweepOptions& opt) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) MPI_Init(nullptr, nullptr);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  LaunchedSweep out;
  try {
    out = run_one_rank(sweep, opt, rank, ranks);
  } catch (const InputError& e) {
    abort_all(rank, e.what(), 2);
  } catch (const std::exception& e) {
    abort_all(rank, e.what(), 1);
  }
  MPI_Finalize();
  return out;
}

#endif

}  // namespace

LaunchedSweep run_sweep_launched(const SweepSpec& sweep, const SweepOptions& options) {
  check_shard(options);
  const MpiLaunch launch = mpi_launch();
  if (launch.size <= 1) return {run_sweep(sweep, options), 0, 1};
#ifdef DPSIM_MPI
  return run_ranks(sweep, options);
#else
  throw RuntimeError(fmt::format(
      "started as one of {} MPI ranks ({}), but this dpsim was built without MPI: every rank would run every "
      "point into the same directory. Rebuild with MPI (libopenmpi-dev, which scripts/setup.sh installs), or run "
      "one process per slice with --shard I/N",
      launch.size, launch.variable));
#endif
}

}  // namespace dpsim
