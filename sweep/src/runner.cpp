// Process pool for sweeps: --jobs workers forked from this process, which has parsed the base scenario's files
// (keep_parsed_files_of), each running the points handed to it one after another (workers.hpp); each row is
// appended as it arrives.
// A point's end decides what is recorded: its row (a result or the point's own error: a crash, a bad
// value, a timeout), nothing (it was stopped from outside: --resume runs it again), or an infrastructure
// failure (its worker could not send it, or its row could not be written) that stops the sweep without recording
// the point.
#include <poll.h>
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
#include "workers.hpp"

namespace dpsim {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

volatile sig_atomic_t g_stop = 0;
extern "C" void on_stop_signal(int) { g_stop = 1; }

// SIGINT/SIGTERM stop the sweep cleanly instead of killing it mid-write; SIGXFSZ (a file size limit) is
// ignored, so that such a write fails with an error like a full disk; SIGPIPE is ignored, so that handing a point to
// a worker that died fails instead of killing the sweep; SIGCHLD is blocked (a worker's end shows as the end of its
// pipe, and waitpid collects it).
struct SignalGuard {
  struct sigaction old_int {
  }, old_term{}, old_xfsz{}, old_pipe{};
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
    sigaction(SIGPIPE, &ignore, &old_pipe);
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
    sigaction(SIGPIPE, &old_pipe, nullptr);
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

Reaped not_recorded(Outcome outcome, std::string why) { return {outcome, std::move(why), "", false}; }

Reaped error_reaped(const SweepSpec& sweep, int64_t index, const std::string& error) {
  std::string line = error_row(sweep, index, error);
  std::string csv = csv_row(sweep, line);
  return {Outcome::row, std::move(line), std::move(csv), false};
}

// What is recorded for the point a worker ran when it ended without sending its row.
Reaped reap(const SweepSpec& sweep, const PointWorker& w, int status, double timeout_s) {
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return not_recorded(Outcome::infrastructure, fmt::format("point {}'s worker left without its result", w.index));
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

// Waits until a worker sends something or ends (its pipe's end), the nearest deadline passes, or a signal arrives
// (at most 100 ms).
void wait_a_little(const std::vector<PointWorker>& workers) {
  auto until = Clock::now() + std::chrono::milliseconds(100);
  std::vector<pollfd> fds;
  for (const PointWorker& w : workers) {
    if (w.index >= 0 && !w.timed_out) until = std::min(until, w.deadline);
    if (w.result_fd >= 0) fds.push_back({w.result_fd, POLLIN, 0});
  }
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
  ::poll(fds.data(), fds.size(), static_cast<int>(std::max<long long>(0, ms)));
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
  std::vector<PointWorker> workers;
  std::string infrastructure;  // why the sweep stopped early, when a point could not be recorded
  bool stop_sent = false;
  size_t next = 0;
  const auto timeout = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt.point_timeout_s));
  const auto record = [&](const Reaped& r, int64_t index) {
    if (r.outcome != Outcome::row) {
      ++summary.unfinished;
      if (r.outcome == Outcome::infrastructure && infrastructure.empty()) infrastructure = r.text;
      return;
    }
    try {
      append_line(jsonl, r.text);
      append_line(csv, r.csv);
    } catch (const RuntimeError& e) {  // a full disk: the point is not recorded (a torn row is dropped on resume)
      ++summary.unfinished;
      if (infrastructure.empty()) infrastructure = e.what();
      return;
    }
    ++summary.ran;
    if (!r.ok) ++summary.failed;
    appended[index] = {jsonl_bytes, r.text.size(), r.csv};
    jsonl_bytes += r.text.size() + 1;
    progress.update(summary.ran, summary.failed);
  };
  const auto stopping = [&] { return g_stop || !infrastructure.empty(); };
  // Hands the next point to an idle worker, or tells it to leave when none is left or the sweep stops.
  const auto hand_over = [&](PointWorker& w) {
    if (stopping() || next >= todo.size()) {
      close_tasks(w);
      return;
    }
    w.index = todo[next++];
    w.deadline = Clock::now() + timeout;
    if (!send_point(w, w.index)) close_tasks(w);  // it died: its reaping records the point
  };
  const auto take_rows = [&](PointWorker& w) {
    std::vector<PointMessage> rows;
    read_rows(w, rows);
    for (PointMessage& m : rows) {
      if (m.index != w.index)
        throw RuntimeError(fmt::format("point worker {} sent point {} for point {}", w.pid, m.index, w.index));
      w.index = -1;
      record(Reaped{Outcome::row, std::move(m.json_line), std::move(m.csv_row), m.ok}, m.index);
      hand_over(w);
    }
  };
  while (next < todo.size() || !workers.empty()) {
    if (stopping() && workers.empty()) break;
    while (!stopping() && next < todo.size() && static_cast<int>(workers.size()) < std::max(1, opt.jobs)) {
      std::vector<const PointWorker*> others;
      for (const PointWorker& w : workers) others.push_back(&w);
      try {
        workers.push_back(start_worker(sweep, others, guard.old_mask));
      } catch (const RuntimeError& e) {
        infrastructure = e.what();
        break;
      }
      hand_over(workers.back());
    }
    if (g_stop && !stop_sent) {
      for (const PointWorker& w : workers) kill(w.pid, SIGTERM);
      stop_sent = true;
    }
    for (PointWorker& w : workers) take_rows(w);
    // Workers that ended: what they sent first counts; the point one was running when it ended is reaped.
    for (int status = 0;;) {
      const pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      const auto it =
          std::find_if(workers.begin(), workers.end(), [pid](const PointWorker& w) { return w.pid == pid; });
      if (it == workers.end()) continue;
      close_tasks(*it);
      take_rows(*it);
      if (it->index >= 0) record(reap(sweep, *it, status, opt.point_timeout_s), it->index);
      close_worker(*it);
      workers.erase(it);
    }
    wait_a_little(workers);
    for (PointWorker& w : workers) {
      if (w.index >= 0 && !w.timed_out && Clock::now() >= w.deadline) {
        kill(w.pid, SIGKILL);
        w.timed_out = true;
      }
    }
  }
  summary.interrupted = g_stop != 0;
  if (summary.interrupted && opt.progress) std::fputc('\n', stderr);
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
