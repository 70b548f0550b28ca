// dpsim sweep SWEEP.yaml -o DIR: a grid (or zip) of scenario overrides, each point in its own process;
// under mpirun/srun the points are shared among the ranks (dpsim/sweep/ranks.hpp), in dpsim-sweep-mpi: built
// into dpsim, this file hands a rank's sweep to that helper (app/helper.hpp); built into it
// (DPSIM_SWEEP_IN_PROCESS), it runs it.
#include <cctype>
#include <thread>

#include <fmt/format.h>

#include "commands.hpp"
#include "dpsim/error.hpp"
#include "dpsim/launcher.hpp"
#include "dpsim/sweep/plot.hpp"
#include "dpsim/sweep/ranks.hpp"
#include "helper.hpp"
#include "option_checks.hpp"
#include "summaries.hpp"

namespace dpsim::app {

namespace {

struct SweepArgs {
  std::string file;
  std::string out = "sweep-results";
  int jobs = 0;
  bool resume = false;
  std::string shard;
  int64_t limit = -1;
  double point_timeout_s = kDefaultPointTimeout_s;
  bool plot = false;
  bool quiet = false;
};

int whole_number(const std::string& text) {
  size_t used = 0;
  const int v = std::stoi(text, &used);
  if (used != text.size() || text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])))
    throw std::invalid_argument("not a whole number");
  return v;
}

void parse_shard(const std::string& text, SweepOptions& o) {
  const auto slash = text.find('/');
  try {
    if (slash == std::string::npos) throw std::invalid_argument("no slash");
    o.shard_index = whole_number(text.substr(0, slash));
    o.shard_count = whole_number(text.substr(slash + 1));
  } catch (const std::exception&) {
    throw InputError(fmt::format("--shard: expected I/N (e.g. 0/4), got \"{}\"", text));
  }
}

}  // namespace

void register_sweep(CLI::App& app) {
  auto a = std::make_shared<SweepArgs>();
  auto* cmd = app.add_subcommand("sweep", kSweepSummary);
  cmd->add_option("SWEEP", a->file, "Sweep YAML (scenarios/sweeps/*.yaml): base scenario + axes")->required();
  cmd->add_option("-o,--output", a->out, "Output directory: results.csv, results.jsonl (default sweep-results)");
  cmd->add_option("-j,--jobs", a->jobs, "Points run at once (default: all cores)")->check(CLI::Range(1, 1 << 16));
  cmd->add_flag("--resume", a->resume, "Keep points already in DIR/results.jsonl and run only the rest");
  cmd->add_option("--shard", a->shard, "Run the deterministic slice I/N (points with index % N == I)");
  cmd->add_option("--limit", a->limit, "Run at most this many points (benchmarking)")
      ->check(whole_number_in(0, int64_t{1} << 40));
  cmd->add_option("--point-timeout", a->point_timeout_s,
                  fmt::format("Seconds a point may run before it is killed and recorded as an error (default {:g})",
                              kDefaultPointTimeout_s));
  cmd->add_flag("--plot", a->plot, "Draw the plots into DIR/plots when the sweep completes");
  cmd->add_flag("-q,--quiet", a->quiet, "No progress bar");
  cmd->callback([a] {
    if (a->out.empty()) throw InputError("-o: the output directory must not be empty");
    const SweepSpec spec = load_sweep(a->file);
    SweepOptions o;
    o.jobs = a->jobs > 0 ? a->jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    o.out_dir = a->out;
    o.resume = a->resume;
    o.limit = a->limit;
    o.progress = !a->quiet;
    o.point_timeout_s = a->point_timeout_s;
    if (!a->shard.empty()) parse_shard(a->shard, o);
#if !defined(DPSIM_SWEEP_IN_PROCESS) && defined(DPSIM_SWEEP_MPI_BUILT)
    // dpsim maps no MPI library: a rank's share of the sweep is dpsim-sweep-mpi's, with these same arguments.
    if (const MpiLaunch launch = mpi_launch(); launch.size > 1) {
      run_helper("dpsim-sweep-mpi",
                 fmt::format("started as one of {} MPI ranks ({}): dpsim runs a rank's share of the sweep in "
                             "dpsim-sweep-mpi, installed next to dpsim, and it was not found",
                             launch.size, launch.variable));
    }
#endif
    const LaunchedSweep run = run_sweep_launched(spec, o);
    const SweepSummary& s = run.summary;
    if (run.rank == 0) {
      fmt::print(stderr,
                 "sweep {}: {} points{}, {} run now ({} failed), {} already done, {:.1f} s, {:.0f} points/hour{}\n",
                 spec.name, s.total, run.ranks > 1 ? fmt::format(" on {} MPI ranks", run.ranks) : "", s.ran, s.failed,
                 s.skipped, s.wall_s, s.wall_s > 0 ? 3600.0 * static_cast<double>(s.ran) / s.wall_s : 0.0,
                 s.interrupted ? " (interrupted: rerun with --resume)" : "");
    }
    if (s.interrupted) throw RuntimeError("interrupted; the finished points are in " + a->out);
    if (s.unfinished > 0) {
      throw RuntimeError(
          fmt::format("{} point{} stopped from outside before finishing (not recorded); the finished "
                      "points are in {}: rerun with --resume",
                      s.unfinished, s.unfinished == 1 ? "" : "s", a->out));
    }
    if (a->plot && run.rank == 0) {
      for (const auto& f : plot_sweep(o.out_dir / "results.csv", o.out_dir / "plots", {}))
        fmt::print("{}\n", f.string());
    }
  });
}

void register_plot(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto kinds = std::make_shared<std::vector<std::string>>();
  auto* cmd = app.add_subcommand("plot", kPlotSummary);
  cmd->add_option("DIR", *dir, "A sweep output directory (holding results.csv)")->required();
  cmd->add_option("-o,--output", *out, "Where to write the plots (default DIR/plots)")->check(non_empty());
  cmd->add_option("--kind", *kinds, "scaling, breakdown, buckets, memory, cost (default: every kind the sweep allows)");
  cmd->callback([dir, out, kinds] {
    const std::filesystem::path d(*dir);
    for (const auto& f :
         plot_sweep(d / "results.csv", out->empty() ? d / "plots" : std::filesystem::path(*out), *kinds)) {
      fmt::print("{}\n", f.string());
    }
  });
}

}  // namespace dpsim::app
