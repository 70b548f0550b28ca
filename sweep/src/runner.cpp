// Process pool for sweeps: fork one child per point, collect its JSON line from a file, append.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dpsim/error.hpp"
#include "dpsim/result.hpp"
#include "dpsim/sweep/runner.hpp"
#include "results.hpp"

namespace dpsim {

namespace fs = std::filesystem;

namespace {

volatile sig_atomic_t g_stop = 0;
extern "C" void on_stop_signal(int) { g_stop = 1; }

struct SignalGuard {  // SIGINT/SIGTERM stop the sweep cleanly instead of killing it mid-write
  struct sigaction old_int {
  }, old_term{};
  SignalGuard() {
    g_stop = 0;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: waitpid returns EINTR
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
  }
  ~SignalGuard() {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
  }
};

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void append_line(const fs::path& file, const std::string& line) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd < 0) throw RuntimeError(fmt::format("cannot write {}", file.string()));
  const std::string text = line + "\n";
  const ssize_t n = ::write(fd, text.data(), text.size());
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size()))
    throw RuntimeError(fmt::format("cannot write {} (disk full?)", file.string()));
}

std::string header_line(const SweepSpec& sweep) {
  std::string h;
  for (const auto& c : csv_header(sweep)) h += (h.empty() ? "" : ",") + c;
  return h;
}

class Progress {
 public:
  Progress(int64_t total, bool enabled) : total_(total), enabled_(enabled), start_(std::chrono::steady_clock::now()) {}
  void update(int64_t done, int64_t failed) const {
    if (!enabled_) return;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double rate = s > 0 ? static_cast<double>(done) / s : 0;
    const double left = rate > 0 ? static_cast<double>(total_ - done) / rate : 0;
    std::fprintf(stderr, "\rsweep: %lld/%lld points (%lld failed), %.2f points/s, %.0f s left   ",
                 static_cast<long long>(done), static_cast<long long>(total_), static_cast<long long>(failed), rate,
                 left);
    if (done == total_) std::fputc('\n', stderr);
    std::fflush(stderr);
  }
  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  int64_t total_;
  bool enabled_;
  std::chrono::steady_clock::time_point start_;
};

[[noreturn]] void child_main(const SweepSpec& sweep, int64_t index, const fs::path& partial) {
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  int code = 0;
  try {
    write_file_atomic(partial, evaluate_point(sweep, index));
  } catch (...) {
    code = 3;
  }
  std::fflush(nullptr);
  _exit(code);
}

}  // namespace

std::map<int64_t, std::string> parse_results(const std::string& jsonl_text) {
  std::map<int64_t, std::string> out;
  std::istringstream in(jsonl_text);
  for (std::string line; std::getline(in, line);) {
    try {
      const auto j = nlohmann::json::parse(line);
      out[j.at("point").get<int64_t>()] = line;
    } catch (const std::exception&) {
      // a line cut by a crash of the machine: that point runs again
    }
  }
  return out;
}

void write_results(const SweepSpec& sweep, const fs::path& dir, const std::map<int64_t, std::string>& lines) {
  std::string jsonl, csv = header_line(sweep) + "\n";
  for (const auto& [index, line] : lines) {
    jsonl += line + "\n";
    csv += csv_row(sweep, line) + "\n";
  }
  write_file_atomic(dir / "results.jsonl", jsonl);
  write_file_atomic(dir / "results.csv", csv);
}

std::map<int64_t, std::string> read_results(const fs::path& jsonl) { return parse_results(read_text(jsonl)); }

void check_shard(const SweepOptions& opt) {
  if (opt.shard_count < 1 || opt.shard_index < 0 || opt.shard_index >= opt.shard_count) {
    throw InputError(fmt::format("--shard {}/{}: need 0 <= I < N", opt.shard_index, opt.shard_count));
  }
}

void split_shard(SweepOptions& options, int rank, int ranks) {
  options.shard_index += options.shard_count * rank;
  options.shard_count *= ranks;
}

SweepSummary run_sweep(const SweepSpec& sweep, const SweepOptions& opt) {
  check_shard(opt);
  std::error_code ec;
  fs::create_directories(opt.out_dir / ".partial", ec);
  if (ec) throw RuntimeError(fmt::format("cannot create {}: {}", opt.out_dir.string(), ec.message()));
  const fs::path jsonl = opt.out_dir / "results.jsonl", csv = opt.out_dir / "results.csv";
  if (!opt.resume) {
    fs::remove(jsonl, ec);
    fs::remove(csv, ec);
  }
  const auto done_before = read_results(jsonl);
  if (!fs::exists(csv)) append_line(csv, header_line(sweep));

  std::vector<int64_t> todo;
  SweepSummary summary;
  const auto count = static_cast<int64_t>(sweep.point_count());
  for (int64_t i = opt.shard_index; i < count; i += opt.shard_count) {
    ++summary.total;
    if (done_before.count(i) || opt.recorded_elsewhere.count(i)) {
      ++summary.skipped;
    } else if (opt.limit < 0 || static_cast<int64_t>(todo.size()) < opt.limit) {
      todo.push_back(i);
    }
  }

  SignalGuard guard;
  Progress progress(static_cast<int64_t>(todo.size()), opt.progress);
  std::map<pid_t, int64_t> running;
  size_t next = 0;
  const auto partial_of = [&](int64_t i) { return opt.out_dir / ".partial" / fmt::format("{}.json", i); };
  while ((next < todo.size() || !running.empty()) && !g_stop) {
    while (next < todo.size() && static_cast<int>(running.size()) < std::max(1, opt.jobs) && !g_stop) {
      const int64_t index = todo[next++];
      std::fflush(nullptr);
      const pid_t pid = fork();
      if (pid < 0) throw RuntimeError("fork failed: cannot start a sweep worker");
      if (pid == 0) child_main(sweep, index, partial_of(index));
      running[pid] = index;
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    const auto it = running.find(pid);
    if (it == running.end()) continue;
    const int64_t index = it->second;
    running.erase(it);
    std::string line;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && fs::exists(partial_of(index))) {
      line = read_text(partial_of(index));
    } else {
      nlohmann::json err{{"point", index}, {"axes", nlohmann::json::object()}};
      for (const auto& o : sweep_point(sweep, index)) err["axes"][o.key_path] = o.value;
      err["error"] = WIFSIGNALED(status)
                         ? fmt::format("the point's process died of signal {}", WTERMSIG(status))
                         : fmt::format("the point's process exited with status {}", WEXITSTATUS(status));
      line = err.dump();
    }
    fs::remove(partial_of(index), ec);
    append_line(jsonl, line);
    append_line(csv, csv_row(sweep, line));
    ++summary.ran;
    if (line.find("\"error\"") != std::string::npos && line.find("\"result\"") == std::string::npos) ++summary.failed;
    progress.update(summary.ran, summary.failed);
  }
  if (g_stop) {
    summary.interrupted = true;
    for (const auto& [pid, index] : running) kill(pid, SIGTERM);
    for (const auto& [pid, index] : running) {
      int status = 0;
      waitpid(pid, &status, 0);
      fs::remove(partial_of(index), ec);
    }
    if (opt.progress) std::fputc('\n', stderr);
  }
  fs::remove_all(opt.out_dir / ".partial", ec);
  // Complete: both files rewritten in point order (atomically).
  if (!summary.interrupted && summary.skipped + summary.ran == summary.total)
    write_results(sweep, opt.out_dir, read_results(jsonl));
  summary.wall_s = progress.elapsed();
  return summary;
}

}  // namespace dpsim
