#include "process_figures.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include <fmt/format.h>

extern char** environ;

namespace dpsim::bench {

namespace fs = std::filesystem;

namespace {

struct OneRun {
  double wall_s = 0;
  double cpu_s = 0;
  double max_rss_bytes = 0;
  bool ok = false;
};

// Through dpsim_bench_rss (bench/rss_launcher.cpp), whose line is read from a pipe.
OneRun run_once(const std::vector<std::string>& argv) {
  std::vector<char*> args{const_cast<char*>(DPSIM_BENCH_RSS)};
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  OneRun r;
  int fds[2];
  if (pipe(fds) != 0) return r;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  std::string line;
  char buf[256];
  for (ssize_t n; rc == 0 && (n = read(fds[0], buf, sizeof buf)) > 0;) line.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  if (rc != 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return r;
  long rss_kb = 0;
  int code = -1;
  if (std::sscanf(line.c_str(), "%lf %ld %d %lf", &r.wall_s, &rss_kb, &code, &r.cpu_s) != 4) return r;
  r.max_rss_bytes = static_cast<double>(rss_kb) * 1024.0;  // Linux: kilobytes
  r.ok = code == 0;
  return r;
}

size_t count_lines(const fs::path& file) {
  std::ifstream in(file);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

}  // namespace

ProcessRun run_process(const std::vector<std::string>& argv, int runs) {
  std::vector<double> walls, cpus;
  ProcessRun out;
  for (int i = 0; i < std::max(1, runs); ++i) {
    const OneRun r = run_once(argv);
    if (!r.ok) ++out.failed;
    walls.push_back(r.wall_s);
    cpus.push_back(r.cpu_s);
    out.max_rss_bytes = std::max(out.max_rss_bytes, r.max_rss_bytes);
  }
  std::sort(walls.begin(), walls.end());
  std::sort(cpus.begin(), cpus.end());
  out.wall_s = walls[walls.size() / 2];
  out.cpu_s = cpus[cpus.size() / 2];
  return out;
}

void print_process_figures(const fs::path& dpsim, const fs::path& root, int runs) {
  fmt::print("\n{:<62} {:>9} {:>9} {:>11}\n", fmt::format("process, as a user runs it (median of {})", runs), "wall ms",
             "CPU ms", "max RSS MB");
  const std::string small = (root / "scenarios/llama3.1-8b-8xh100.yaml").string();
  const std::string large = (root / "scenarios/llama3.1-8b-1024xh100-ib.yaml").string();
  // Issue 18's targets: --version and estimate under 20 ms and 30 MB; predict at 256 GPUs under 40 ms of CPU (the
  // process and its simulating children, the advice's variants included).
  const std::vector<std::pair<std::string, std::vector<std::string>>> commands = {
      {"dpsim --version", {dpsim.string(), "--version"}},
      {"dpsim estimate llama3.1-8b-8xh100", {dpsim.string(), "estimate", small}},
      {"dpsim predict llama3.1-8b-8xh100", {dpsim.string(), "predict", small}},
      {"dpsim predict llama3.1-8b-1024xh100-ib, 32 nodes (256 GPUs)",
       {dpsim.string(), "predict", large, "--set", "cluster.nodes=32"}},
  };
  for (const auto& [label, argv] : commands) {
    const ProcessRun r = run_process(argv, runs);
    fmt::print("{:<62} {:>9.1f} {:>9.1f} {:>11.1f}{}\n", label, r.wall_s * 1e3, r.cpu_s * 1e3, r.max_rss_bytes / 1e6,
               r.failed ? fmt::format("  ({} runs FAILED)", r.failed) : "");
  }
}

bool print_sweep_rate(const fs::path& dpsim, const fs::path& sweep, int points, int jobs) {
  char dir_template[] = "/tmp/dpsim-bench-sweep-XXXXXX";
  if (!mkdtemp(dir_template)) return false;
  const fs::path dir = dir_template;
  const ProcessRun r = run_process({dpsim.string(), "sweep", sweep.string(), "-o", (dir / "out").string(), "-q", "-j",
                                    std::to_string(jobs), "--limit", std::to_string(points)},
                                   1);
  const size_t rows = count_lines(dir / "out" / "results.csv");
  std::error_code ec;
  fs::remove_all(dir, ec);
  const bool ok = r.failed == 0 && rows == static_cast<size_t>(points) + 1;
  fmt::print("sweep {} ({} points, -j {}, whole process): {:.2f} s, {:.0f} points/hour, max RSS {:.1f} MB{}\n",
             sweep.stem().string(), points, jobs, r.wall_s, r.wall_s > 0 ? 3600.0 * points / r.wall_s : 0.0,
             r.max_rss_bytes / 1e6, ok ? "" : fmt::format("  (FAILED: {} rows)", rows > 0 ? rows - 1 : 0));
  return ok;
}

}  // namespace dpsim::bench
