// simulate(): the direct engine in this process where it runs the step; otherwise SimGrid in a forked child (SimGrid
// has one engine per process, never reset), the result read back as JSON through a pipe. A child failure becomes an
// exception here.
#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "dpsim/error.hpp"
#include "dpsim/sim/simulate.hpp"

namespace dpsim {

namespace {

nlohmann::json timeline_to_json(const std::vector<TimelineEvent>& events) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& e : events) a.push_back({e.rank, e.track, e.name, e.start_s, e.end_s});
  return a;
}

std::vector<TimelineEvent> timeline_from_json(const nlohmann::json& a) {
  std::vector<TimelineEvent> events;
  events.reserve(a.size());
  for (const auto& e : a)
    events.push_back({e.at(0).get<int>(), e.at(1).get<std::string>(), e.at(2).get<std::string>(), e.at(3).get<double>(),
                      e.at(4).get<double>()});
  return events;
}

[[noreturn]] void child(int fd, const Scenario& scenario, const StepPlan& plan, const SimOptions& options) {
  nlohmann::json out;
  int code = 0;
  try {
    SimStats stats;
    StepResult r = simulate_in_process(scenario, plan, options, &stats);
    out["result"] = to_json(r);
    if (options.timeline) out["timeline"] = timeline_to_json(r.timeline);
    out["stats"] = {{"simulate_wall_s", stats.simulate_wall_s},   {"events", stats.events},    {"flows", stats.flows},
                    {"estimated_events", stats.estimated_events}, {"hosts", stats.hosts},      {"links", stats.links},
                    {"peak_rss_bytes", stats.peak_rss_bytes},     {"executed", stats.executed}};
  } catch (const InputError& e) {
    out = {{"error", e.what()}, {"kind", "input"}};
    code = 1;
  } catch (const std::exception& e) {
    out = {{"error", e.what()}, {"kind", "runtime"}};
    code = 1;
  } catch (...) {
    out = {{"error", "unknown exception"}, {"kind", "runtime"}};
    code = 1;
  }
  write_all(fd, out.dump());
  ::close(fd);
  std::fflush(stderr);
  ::_exit(code);
}

}  // namespace

StepResult simulate(const Scenario& scenario, const StepPlan& plan, const SimOptions& options) {
  return simulate(scenario, plan, options, nullptr);
}

StepResult simulate(const Scenario& scenario, const StepPlan& plan, const SimOptions& options, SimStats* stats) {
  const auto start = std::chrono::steady_clock::now();
  if (std::optional<StepResult> r = simulate_direct(scenario, plan, options, stats)) return std::move(*r);
  int fds[2];
  if (::pipe(fds) != 0) throw RuntimeError(fmt::format("simulator: pipe: {}", std::strerror(errno)));
  std::fflush(nullptr);  // nothing buffered may be written twice
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw RuntimeError(fmt::format("simulator: fork: {}", std::strerror(errno)));
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);     // a caller killed mid-run (a sweep point past its timeout) takes it along
    if (::getppid() != parent) ::_exit(1);  // ... also when it was killed before that
    ::close(fds[0]);
    child(fds[1], scenario, plan, options);
  }
  ::close(fds[1]);
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_object() && j.contains("error")) {
    const std::string message = j["error"].get<std::string>();
    if (j.value("kind", "") == "input") throw InputError(message);
    throw RuntimeError("simulation failed: " + message);
  }
  if (WIFSIGNALED(status))
    throw RuntimeError(
        fmt::format("simulation process killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status))));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !j.is_object() || !j.contains("result"))
    throw RuntimeError(fmt::format("simulation process failed (exit status {}) without a result",
                                   WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  StepResult r = result_from_json(j["result"]);
  if (options.timeline) r.timeline = timeline_from_json(j["timeline"]);
  if (stats) {
    const auto& s = j["stats"];
    stats->simulate_wall_s = s.value("simulate_wall_s", 0.0);
    stats->events = s.value("events", int64_t{0});
    stats->flows = s.value("flows", int64_t{0});
    stats->estimated_events = s.value("estimated_events", 0.0);
    stats->hosts = s.value("hosts", int64_t{0});
    stats->links = s.value("links", int64_t{0});
    stats->peak_rss_bytes = s.value("peak_rss_bytes", int64_t{0});
    stats->executed = s.value("executed", std::vector<std::string>{});
    stats->wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return r;
}

}  // namespace dpsim
