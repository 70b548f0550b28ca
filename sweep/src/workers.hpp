#pragma once
// The sweep's point workers: processes forked from the sweep's parent (which has parsed the base scenario's files
// once), each running points one after another as the parent hands them over a pipe, and sending each point's row
// back over another. A point runs in a worker's own process, so a crash or a hang costs that point only (the parent
// records it and starts another worker); a worker runs many points, so a point costs no fork.
#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "dpsim/sweep/runner.hpp"

namespace dpsim {

// A worker that could not evaluate or send a point exits with this (its message on stderr).
inline constexpr int kInfrastructureStatus = 3;

// A point's row as a worker sent it.
struct PointMessage {
  int64_t index = 0;
  bool ok = false;  // the row holds a result
  std::string json_line, csv_row;
};

struct PointWorker {
  pid_t pid = -1;
  int task_fd = -1;    // the parent writes point indices here; closed: the worker leaves
  int result_fd = -1;  // the worker's rows (nonblocking on the parent's side)
  int64_t index = -1;  // the point it runs, -1 when it runs none
  std::chrono::steady_clock::time_point deadline;
  bool timed_out = false;  // killed by the parent at its deadline
  std::string received;    // bytes read and not yet a whole message
};

// Forks a worker. In the child every pipe of `others` is closed (a worker must not hold another's task pipe open),
// signals are restored to `mask` and their defaults. Throws RuntimeError when a pipe or the fork fails.
PointWorker start_worker(const SweepSpec& sweep, const std::vector<const PointWorker*>& others, const sigset_t& mask);

// Hands point `index` to an idle worker; false when its pipe is broken (the worker is gone: reaping it says why).
bool send_point(PointWorker& w, int64_t index);

// Closes the worker's task pipe: it leaves once it has sent the point it runs.
void close_tasks(PointWorker& w);

// Reads what the worker has sent without blocking; appends each whole row to `out`. Returns false once the pipe is
// at its end (the worker left or died; the pipe is closed then).
bool read_rows(PointWorker& w, std::vector<PointMessage>& out);

// Closes the parent's ends of the worker's pipes.
void close_worker(PointWorker& w);

}  // namespace dpsim
