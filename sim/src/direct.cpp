#include "direct.hpp"

#include <algorithm>
#include <utility>

#include "dpsim/error.hpp"

namespace dpsim::sim {

void Blocking::await_suspend(std::coroutine_handle<> h) { engine->block(*this, h); }

DirectEngine::DirectEngine(std::vector<PstateSpeeds> host_speeds) {
  for (const auto& s : host_speeds) hosts_.push_back(Host{s, 0, {}, 0, 0, 0});
}

Blocking DirectEngine::compute(int host, double ops) {
  if (!(ops > 0)) return {};
  return {this, Blocking::Kind::compute, host, ops, nullptr};
}

Blocking DirectEngine::sleep(double seconds) {
  if (!(seconds > 0)) return {};
  return {this, Blocking::Kind::sleep, 0, seconds, nullptr};
}

int DirectEngine::semaphore() {
  semaphores_.emplace_back();
  return static_cast<int>(semaphores_.size()) - 1;
}

void DirectEngine::send_all(const std::vector<FlowSend>&) {
  throw RuntimeError("simulator: a call that lays flows on the direct engine");
}

void DirectEngine::run(std::vector<StreamStart>& streams) {
  std::vector<Task> tasks;
  tasks.reserve(streams.size());
  for (StreamStart& s : streams) tasks.push_back(s.start());
  run(tasks);
}

Blocking DirectEngine::acquire(Semaphore& s) {
  if (s.units > 0) {
    --s.units;
    return {this, Blocking::Kind::yield, 0, 0, nullptr};
  }
  return {this, Blocking::Kind::acquire, 0, 0, &s};
}

Blocking DirectEngine::release(Semaphore& s) {
  if (s.waiters.empty()) {
    ++s.units;
  } else {
    at(now_, s.waiters.front());  // before the releaser, which yields
    s.waiters.pop_front();
  }
  return {this, Blocking::Kind::yield, 0, 0, nullptr};
}

Blocking DirectEngine::set_pstate(int host, int pstate) {
  Host& h = hosts_.at(static_cast<size_t>(host));
  if (h.running) {
    h.left_ops -= (now_ - h.since) * h.speed[static_cast<size_t>(h.pstate)];
    h.since = now_;
  }
  h.pstate = pstate;
  if (h.running) reschedule(h, host);
  return {this, Blocking::Kind::yield, 0, 0, nullptr};
}

void DirectEngine::block(const Blocking& b, std::coroutine_handle<> h) {
  switch (b.kind) {
    case Blocking::Kind::compute: {
      Host& host = hosts_.at(static_cast<size_t>(b.host));
      if (host.running) throw RuntimeError("simulator: two compute ops at once on one host (direct engine)");
      host.running = h;
      host.left_ops = b.amount;
      host.since = now_;
      reschedule(host, b.host);
      break;
    }
    case Blocking::Kind::sleep: at(now_ + b.amount, h); break;
    case Blocking::Kind::acquire: b.semaphore->waiters.push_back(h); break;
    case Blocking::Kind::yield:
    case Blocking::Kind::none: at(now_, h); break;
  }
}

void DirectEngine::at(double time, std::coroutine_handle<> h, int host, uint64_t version) {
  events_.push({time, seq_++, h, host, version});
}

void DirectEngine::reschedule(Host& host, int index) {
  at(now_ + std::max(0.0, host.left_ops) / host.speed[static_cast<size_t>(host.pstate)], host.running, index,
     ++host.version);
}

void DirectEngine::run(std::vector<Task>& tasks) {
  for (const Task& t : tasks)
    if (t.done()) t.rethrow();
  while (!events_.empty()) {
    const Event e = events_.top();
    events_.pop();
    if (e.host >= 0) {
      Host& h = hosts_[static_cast<size_t>(e.host)];
      if (e.version != h.version || !h.running) continue;  // the op's end moved (its host changed speed)
      h.running = {};
    }
    now_ = e.time;
    e.resume.resume();
    for (const Task& t : tasks)
      if (t.done()) t.rethrow();
  }
  for (const Task& t : tasks)
    if (!t.done())
      throw RuntimeError("simulator: the step program stopped with a stream waiting for an event no stream records");
}

}  // namespace dpsim::sim
