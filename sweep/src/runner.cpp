// Process pool for sweeps: fork one worker per point from this process, which has parsed the base scenario's files
// (keep_parsed_files_of), collect its JSON line from a file, append.
// A worker's end decides what is recorded: its row (a result or the point's own error: a crash, a bad
// value, a timeout), nothing (it was stopped from outside: --resume runs it again), or an infrastructure
// failure (it could not write its result) that stops the sweep without recording the point.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dpsim/error.hpp"
#include "dpsim/load.hpp"
#include "dpsim/result.hpp"
#include "dpsim/sweep/runner.hpp"
#include "results.hpp"

namespace dpsim {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kInfrastructureStatus = 3;  // a worker that could not write its result exits with this
volatile sig_atomic_t g_stop = 0;
extern "C" void on_stop_signal(int) { g_stop = 1; }

// SIGINT/SIGTERM stop the sweep cleanly instead of killing it mid-write; SIGXFSZ (a file size limit) is
// ignored, so that such a write fails with an error like a full disk; SIGCHLD is blocked so that
// sigtimedwait can wait for a worker and a deadline at once.
struct SignalGuard {
  struct sigaction old_int {
  }, old_term{}, old_xfsz{};
  sigset_t old_mask{};
  SignalGuard() {
    g_stop = 0;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: a wait returns EINTR
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGXFSZ, &ignore, &old_xfsz);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &old_mask);
  }
  ~SignalGuard() {
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    sigaction(SIGXFSZ, &old_xfsz, nullptr);
  }
};

class Progress {
 public:
  Progress(int64_t total, bool enabled) : total_(total), enabled_(enabled), start_(Clock::now()) {}
  void update(int64_t done, int64_t failed) const {
    if (!enabled_) return;
    const double s = elapsed();
    const double rate = s > 0 ? static_cast<double>(done) / s : 0;
    const double left = rate > 0 ? static_cast<double>(total_ - done) / rate : 0;
    std::fprintf(stderr, "\rsweep: %lld/%lld points (%lld failed), %.2f points/s, %.0f s left   ",
                 static_cast<long long>(done), static_cast<long long>(total_), static_cast<long long>(failed), rate,
                 left);
    if (done == total_) std::fputc('\n', stderr);
    std::fflush(stderr);
  }
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  int64_t total_;
  bool enabled_;
  Clock::time_point start_;
};

[[noreturn]] void child_main(const SweepSpec& sweep, int64_t index, const fs::path& partial, const sigset_t& mask) {
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  sigprocmask(SIG_SETMASK, &mask, nullptr);
  int code = 0;
  try {
    const PointRow row = evaluate_point(sweep, index);
    write_file_atomic(partial,
                      fmt::format("{} {}\n{}\n{}\n", index, row.ok ? "ok" : "error", row.json_line, row.csv_row));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dpsim sweep: point %lld: %s\n", static_cast<long long>(index), e.what());
    code = kInfrastructureStatus;
  } catch (...) {
    code = kInfrastructureStatus;
  }
  std::fflush(nullptr);
  _exit(code);
}

struct Worker {
  int64_t index = 0;
  Clock::time_point deadline;
  bool timed_out = false;  // killed by us at its deadline
};

enum class Outcome { row, unfinished, infrastructure };
struct Reaped {
  Outcome outcome = Outcome::row;
  std::string text;  // the JSON row, or why nothing was recorded
  std::string csv;   // the CSV row
  bool ok = false;   // the row holds a result
};

// Signals that stop a worker from outside (a terminal's Ctrl-C, kill, a logout, the OOM killer): the
// point did not fail, it did not finish.
bool stopped_from_outside(int sig) {
  return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT || sig == SIGKILL;
}

std::string error_row(const SweepSpec& sweep, int64_t index, const std::string& error) {
  nlohmann::json err{{"point", index}, {"axes", nlohmann::json::object()}};
  for (const auto& o : sweep_point(sweep, index)) err["axes"][o.key_path] = o.value;
  err["error"] = error;
  return err.dump();
}

// A worker's result file (child_main writes it atomically): "POINT ok|error", the JSON row, the CSV row,
// each ending with a newline. Nothing when the file is not that, for this point.
std::optional<Reaped> read_partial(const fs::path& partial, int64_t index) {
  const std::string text = read_text(partial);
  const size_t a = text.find('\n'), b = text.find('\n', a + 1), c = text.find('\n', b + 1);
  if (c == std::string::npos || c + 1 != text.size()) return std::nullopt;
  const std::string head = text.substr(0, a), number = std::to_string(index);
  const bool ok = head == number + " ok";
  if (!ok && head != number + " error") return std::nullopt;
  return Reaped{Outcome::row, text.substr(a + 1, b - a - 1), text.substr(b + 1, c - b - 1), ok};
}

Reaped not_recorded(Outcome outcome, std::string why) { return {outcome, std::move(why), "", false}; }

Reaped error_reaped(const SweepSpec& sweep, int64_t index, const std::string& error) {
  std::string line = error_row(sweep, index, error);
  std::string csv = csv_row(sweep, line);
  return {Outcome::row, std::move(line), std::move(csv), false};
}

Reaped reap(const SweepSpec& sweep, const Worker& w, int status, const fs::path& partial, double timeout_s) {
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    if (auto row = read_partial(partial, w.index)) return std::move(*row);
    return not_recorded(Outcome::infrastructure,
                        fmt::format("point {}'s worker left no readable result in {}", w.index, partial.string()));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == kInfrastructureStatus)
    return not_recorded(Outcome::infrastructure,
                        fmt::format("point {} could not be recorded (its message is above)", w.index));
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ)
    return not_recorded(Outcome::infrastructure,
                        fmt::format("point {}'s worker exceeded the file size limit", w.index));
  if (w.timed_out)
    return error_reaped(sweep, w.index, fmt::format("the point ran longer than {:g} s (--point-timeout)", timeout_s));
  if (g_stop || (WIFSIGNALED(status) && stopped_from_outside(WTERMSIG(status))))
    return not_recorded(Outcome::unfinished, "");
  return error_reaped(
      sweep, w.index,
      WIFSIGNALED(status)
          ? fmt::format("the point's process died of signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)))
          : fmt::format("the point's process exited with status {}", WEXITSTATUS(status)));
}

// Waits until a worker ends, the nearest deadline passes, or a signal arrives (at most 100 ms: a SIGCHLD
// taken by another thread is not waited for longer).
void wait_a_little(const std::map<pid_t, Worker>& running) {
  auto until = Clock::now() + std::chrono::milliseconds(100);
  for (const auto& [pid, w] : running) until = std::min(until, w.deadline);
  const auto ns =
      std::max<long long>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(until - Clock::now()).count());
  const timespec t{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigtimedwait(&chld, nullptr, &t);
}

// A row this sweep appended to results.jsonl, for the final rewrite (the parent keeps no JSON rows while it
// forks: a worker's fork copies the parent's page tables, and the parent's writes then copy shared pages).
struct Appended {
  uint64_t offset = 0;  // of the JSON row in results.jsonl
  uint64_t bytes = 0;   // without its newline
  std::string csv;
};

// Rewrites both files in point order: the rows recorded before, and those appended now, read back from where
// they were appended (a file that is not as this sweep wrote it is read row by row instead).
void write_in_point_order(const SweepSpec& sweep, const fs::path& dir, std::map<int64_t, std::string> lines,
                          const std::map<int64_t, Appended>& appended) {
  const fs::path jsonl = dir / "results.jsonl";
  std::string text = read_text(jsonl);
  std::map<int64_t, std::string> csv_rows;
  for (const auto& [index, a] : appended) {
    if (a.offset + a.bytes >= text.size() || text[a.offset + a.bytes] != '\n' ||
        (a.offset > 0 && text[a.offset - 1] != '\n')) {
      write_results(sweep, dir, parse_results(text, jsonl.string()));
      return;
    }
    lines[index] = text.substr(a.offset, a.bytes);
    csv_rows[index] = a.csv;
  }
  std::string().swap(text);  // the rows are in `lines` now
  write_results(sweep, dir, lines, csv_rows);
}

}  // namespace

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
  if (!(opt.point_timeout_s > 0) || !std::isfinite(opt.point_timeout_s))
    throw InputError(fmt::format("--point-timeout: must be a number of seconds > 0, got {}", opt.point_timeout_s));
  std::error_code ec;
  fs::create_directories(opt.out_dir, ec);
  if (ec) throw RuntimeError(fmt::format("cannot create {}: {}", opt.out_dir.string(), ec.message()));
  std::optional<DirLock> lock;
  if (opt.owns_dir) lock.emplace(opt.out_dir);
  const fs::path partial_dir = opt.out_dir / ".partial";
  fs::remove_all(partial_dir, ec);  // a killed run's leftovers
  fs::create_directories(partial_dir, ec);
  if (ec) throw RuntimeError(fmt::format("cannot create {}: {}", partial_dir.string(), ec.message()));
  const fs::path jsonl = opt.out_dir / "results.jsonl", csv = opt.out_dir / "results.csv";
  if (!opt.resume) {
    fs::remove(jsonl, ec);
    fs::remove(csv, ec);
  }
  const auto done_before = read_results(jsonl);
  if (opt.resume && opt.owns_dir) check_recorded(sweep, jsonl, done_before);
  if (fs::exists(jsonl) || fs::exists(csv)) {
    write_results(sweep, opt.out_dir, done_before);  // drops a partial last line; the CSV agrees with the rows
  } else {
    append_line(csv, csv_header_line(sweep));
  }

  // The rows run now, for the final rewrite: where each JSON row lies in results.jsonl, and its CSV row.
  std::map<int64_t, Appended> appended;
  uint64_t jsonl_bytes = fs::exists(jsonl) ? fs::file_size(jsonl) : 0;
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

  // Every worker is forked from this process: parse the base scenario's files once, here.
  if (!todo.empty()) keep_parsed_files_of(sweep.base);
  SignalGuard guard;
  Progress progress(static_cast<int64_t>(todo.size()), opt.progress);
  std::map<pid_t, Worker> running;
  std::string infrastructure;  // why the sweep stopped early, when a point could not be recorded
  bool stop_sent = false;
  size_t next = 0;
  const auto partial_of = [&](int64_t i) { return partial_dir / fmt::format("{}.json", i); };
  const auto timeout = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt.point_timeout_s));
  const auto finish = [&](pid_t pid, int status) {
    const auto it = running.find(pid);
    if (it == running.end()) return;
    const Worker w = it->second;
    running.erase(it);
    const Reaped r = reap(sweep, w, status, partial_of(w.index), opt.point_timeout_s);
    fs::remove(partial_of(w.index), ec);
    if (r.outcome != Outcome::row) {
      ++summary.unfinished;
      if (r.outcome == Outcome::infrastructure && infrastructure.empty()) infrastructure = r.text;
      return;
    }
    append_line(jsonl, r.text);
    append_line(csv, r.csv);
    ++summary.ran;
    if (!r.ok) ++summary.failed;
    appended[w.index] = {jsonl_bytes, r.text.size(), r.csv};
    jsonl_bytes += r.text.size() + 1;
    progress.update(summary.ran, summary.failed);
  };
  while (next < todo.size() || !running.empty()) {
    const bool stopping = g_stop || !infrastructure.empty();
    if (stopping && running.empty()) break;
    while (!stopping && next < todo.size() && static_cast<int>(running.size()) < std::max(1, opt.jobs)) {
      const int64_t index = todo[next];
      std::fflush(nullptr);
      const pid_t pid = fork();
      if (pid < 0) {
        infrastructure = fmt::format("cannot start a worker for point {}: fork: {}", index, std::strerror(errno));
        break;
      }
      if (pid == 0) child_main(sweep, index, partial_of(index), guard.old_mask);
      running[pid] = {index, Clock::now() + timeout, false};
      ++next;
    }
    if (g_stop && !stop_sent) {
      for (const auto& [pid, w] : running) kill(pid, SIGTERM);
      stop_sent = true;
    }
    bool reaped = false;
    for (int status = 0; !running.empty();) {
      const pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      finish(pid, status);
      reaped = true;
    }
    if (!reaped && !running.empty()) wait_a_little(running);
    for (auto& [pid, w] : running) {
      if (!w.timed_out && Clock::now() >= w.deadline) {
        kill(pid, SIGKILL);
        w.timed_out = true;
      }
    }
  }
  summary.interrupted = g_stop != 0;
  if (summary.interrupted && opt.progress) std::fputc('\n', stderr);
  fs::remove_all(partial_dir, ec);
  summary.wall_s = progress.elapsed();
  if (!infrastructure.empty()) {
    throw RuntimeError(
        fmt::format("{}; the sweep stopped. The points recorded so far are kept in {}: fix the cause "
                    "and rerun with --resume",
                    infrastructure, opt.out_dir.string()));
  }
  // Complete: both files rewritten in point order (atomically).
  if (!summary.interrupted && summary.unfinished == 0 && summary.skipped + summary.ran == summary.total)
    write_in_point_order(sweep, opt.out_dir, done_before, appended);
  return summary;
}

}  // namespace dpsim
