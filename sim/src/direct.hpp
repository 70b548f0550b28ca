#pragma once
// The direct engine: where a step lays no flows (fast fidelity's probed calls: each call is a sleep of its computed
// time), it runs the stream coroutines itself: an event queue in virtual time, a compute host per rank class whose
// speed drops while a collective runs beside it (its pstates, dpsim/overlap.hpp), semaphores handed over in FIFO order,
// and SimGrid's turn order. It gives the times SimGrid's engine gives (the goldens, to 1e-9) without SimGrid: no
// process that runs only such steps loads it.
#include <queue>

#include "engine.hpp"

namespace dpsim::sim {

class DirectEngine final : public StepEngine {
 public:
  // Each compute host's speed (ops per second) at each pstate.
  explicit DirectEngine(std::vector<PstateSpeeds> host_speeds);

  std::string name() const override { return "dpsim direct (no flows laid)"; }
  double now() const override { return now_; }
  Blocking compute(int host, double ops) override;
  Blocking sleep(double seconds) override;
  int semaphore() override;
  Blocking acquire(int semaphore) override { return acquire(semaphores_.at(static_cast<size_t>(semaphore))); }
  Blocking release(int semaphore) override { return release(semaphores_.at(static_cast<size_t>(semaphore))); }
  Blocking set_pstate(int host, int pstate) override;
  void send_all(const std::vector<FlowSend>& flows) override;  // a RuntimeError: the direct engine lays no flow
  // Starts the streams in order (each runs until it first waits), the driving one last, then runs them.
  void run(std::vector<StreamStart>& streams) override;

  Blocking acquire(Semaphore& s);
  Blocking release(Semaphore& s);
  // Runs the tasks (each started, at time 0, when it was called) until no event is left; a task's exception is
  // rethrown, and a task left waiting is a RuntimeError (a deadlock of the program).
  void run(std::vector<Task>& tasks);

  // Blocking's await_suspend.
  void block(const Blocking& b, std::coroutine_handle<> h);

 private:
  struct Event {
    double time = 0;
    uint64_t seq = 0;
    std::coroutine_handle<> resume;
    int host = -1;         // a compute op's end: valid while the host's version is this one
    uint64_t version = 0;  // (an op's end moves when the host's speed changes)
    bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
  };
  struct Host {
    PstateSpeeds speed{};
    int pstate = 0;
    std::coroutine_handle<> running;  // the op's coroutine, or none
    double left_ops = 0, since = 0;
    uint64_t version = 0;
  };
  void at(double time, std::coroutine_handle<> h, int host = -1, uint64_t version = 0);
  void reschedule(Host& host, int index);

  double now_ = 0;
  uint64_t seq_ = 0;
  std::vector<Host> hosts_;
  std::deque<Semaphore> semaphores_;  // semaphore(): a deque, so a waiting Blocking's pointer stays valid
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
};

}  // namespace dpsim::sim
