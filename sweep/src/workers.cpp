// Point workers (workers.hpp). A row travels as "BYTES\n" then BYTES bytes: "POINT ok|error\nJSON\nCSV\n".
#include "workers.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "dpsim/error.hpp"
#include "dpsim/result.hpp"

namespace dpsim {

namespace {

// A point index from the parent; false at the pipe's end (or on an error reading it).
bool read_index(int fd, int64_t& index) {
  char* p = reinterpret_cast<char*>(&index);
  size_t got = 0;
  while (got < sizeof index) {
    const ssize_t n = ::read(fd, p + got, sizeof index - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

[[noreturn]] void worker_main(const SweepSpec& sweep, int task_fd, int result_fd, const sigset_t& mask) {
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  sigprocmask(SIG_SETMASK, &mask, nullptr);
  int64_t index = 0;
  while (read_index(task_fd, index)) {
    std::string body;
    try {
      const PointRow row = evaluate_point(sweep, index);
      body = fmt::format("{} {}\n{}\n{}\n", index, row.ok ? "ok" : "error", row.json_line, row.csv_row);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dpsim sweep: point %lld: %s\n", static_cast<long long>(index), e.what());
      std::fflush(nullptr);
      _exit(kInfrastructureStatus);
    } catch (...) {
      _exit(kInfrastructureStatus);
    }
    const std::string message = fmt::format("{}\n{}", body.size(), body);
    if (!write_all(result_fd, message)) _exit(kInfrastructureStatus);
  }
  std::fflush(nullptr);
  _exit(0);
}

// One row from the message body; nothing when it is not "POINT ok|error\nJSON\nCSV\n".
bool parse_body(const std::string& text, PointMessage& m) {
  const size_t a = text.find('\n'), b = text.find('\n', a + 1), c = text.find('\n', b + 1);
  if (a == std::string::npos || b == std::string::npos || c == std::string::npos || c + 1 != text.size()) return false;
  const std::string head = text.substr(0, a);
  const size_t space = head.find(' ');
  if (space == std::string::npos) return false;
  const std::string status = head.substr(space + 1);
  if (status != "ok" && status != "error") return false;
  try {
    size_t used = 0;
    m.index = std::stoll(head.substr(0, space), &used);
    if (used != space) return false;
  } catch (const std::exception&) {
    return false;
  }
  m.ok = status == "ok";
  m.json_line = text.substr(a + 1, b - a - 1);
  m.csv_row = text.substr(b + 1, c - b - 1);
  return true;
}

}  // namespace

PointWorker start_worker(const SweepSpec& sweep, const std::vector<const PointWorker*>& others, const sigset_t& mask) {
  int tasks[2], rows[2];
  if (::pipe(tasks) != 0)
    throw RuntimeError(fmt::format("cannot start a point worker: pipe: {}", std::strerror(errno)));
  if (::pipe(rows) != 0) {
    const int err = errno;
    ::close(tasks[0]);
    ::close(tasks[1]);
    throw RuntimeError(fmt::format("cannot start a point worker: pipe: {}", std::strerror(err)));
  }
  std::fflush(nullptr);  // nothing buffered may be written twice
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    for (int fd : {tasks[0], tasks[1], rows[0], rows[1]}) ::close(fd);
    throw RuntimeError(fmt::format("cannot start a point worker: fork: {}", std::strerror(err)));
  }
  if (pid == 0) {
    for (const PointWorker* o : others) {
      if (o->task_fd >= 0) ::close(o->task_fd);
      if (o->result_fd >= 0) ::close(o->result_fd);
    }
    ::close(tasks[1]);
    ::close(rows[0]);
    worker_main(sweep, tasks[0], rows[1], mask);
  }
  ::close(tasks[0]);
  ::close(rows[1]);
  ::fcntl(rows[0], F_SETFL, ::fcntl(rows[0], F_GETFL) | O_NONBLOCK);
  PointWorker w;
  w.pid = pid;
  w.task_fd = tasks[1];
  w.result_fd = rows[0];
  return w;
}

bool send_point(PointWorker& w, int64_t index) {
  if (w.task_fd < 0) return false;
  return write_all(w.task_fd, std::string_view(reinterpret_cast<const char*>(&index), sizeof index));
}

void close_tasks(PointWorker& w) {
  if (w.task_fd >= 0) ::close(w.task_fd);
  w.task_fd = -1;
}

bool read_rows(PointWorker& w, std::vector<PointMessage>& out) {
  bool open = w.result_fd >= 0;
  char buffer[1 << 16];
  while (open) {
    const ssize_t n = ::read(w.result_fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) {
      ::close(w.result_fd);
      w.result_fd = -1;
      open = false;
      break;
    }
    w.received.append(buffer, static_cast<size_t>(n));
  }
  for (;;) {
    const size_t eol = w.received.find('\n');
    if (eol == std::string::npos) break;
    size_t bytes = 0;
    try {
      bytes = std::stoull(w.received.substr(0, eol));
    } catch (const std::exception&) {
      throw RuntimeError(fmt::format("point worker {} sent a row that is not one", w.pid));
    }
    if (w.received.size() - eol - 1 < bytes) break;
    PointMessage m;
    if (!parse_body(w.received.substr(eol + 1, bytes), m))
      throw RuntimeError(fmt::format("point worker {} sent a row that is not one", w.pid));
    out.push_back(std::move(m));
    w.received.erase(0, eol + 1 + bytes);
  }
  return open;
}

void close_worker(PointWorker& w) {
  close_tasks(w);
  if (w.result_fd >= 0) ::close(w.result_fd);
  w.result_fd = -1;
}

}  // namespace dpsim
