#pragma once
// The step program's stream actors are C++20 coroutines (Task), so that one executor (step.cpp's Run) runs on two
// engines. On SimGrid each actor drives its coroutine to the end at once: every blocking step (an op's compute, a
// sleep, a semaphore) blocks the actor inside SimGrid, and the coroutine never suspends. Where a run lays no flows
// (fast fidelity's probed calls: each call is a sleep of its computed time), DirectEngine runs the same coroutines
// itself: an event queue in virtual time, a compute host per rank class whose speed drops while a collective runs
// beside it (SimGrid's pstate 1), semaphores handed over in FIFO order. It gives the times SimGrid's engine gives
// (the goldens, to 1e-9) without its contexts and activity bookkeeping, most of a sweep point's time.
#include <array>
#include <coroutine>
#include <cstdint>
#include <deque>
#include <exception>
#include <queue>
#include <vector>

namespace dpsim::sim {

// A coroutine that starts at once, on its caller's stack, like a call: one that never suspends (every step of it on
// SimGrid) returns to its caller done, and awaiting it goes on at once, so a stream's thousands of instructions never
// nest on the stack (symmetric transfer is not a guaranteed tail call at every optimization level). One that suspends
// (the direct engine) resumes its awaiter when it ends.
class Task {
 public:
  struct promise_type {
    std::coroutine_handle<> continuation;  // its awaiter, once it waits for this task
    std::exception_ptr error;
    Task get_return_object() { return Task(std::coroutine_handle<promise_type>::from_promise(*this)); }
    std::suspend_never initial_suspend() noexcept { return {}; }
    struct Final {
      bool await_ready() noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> h) noexcept {
        const std::coroutine_handle<> c = h.promise().continuation;
        return c ? c : std::noop_coroutine();
      }
      void await_resume() noexcept {}
    };
    Final final_suspend() noexcept { return {}; }
    void return_void() {}
    void unhandled_exception() { error = std::current_exception(); }
  };

  explicit Task(std::coroutine_handle<promise_type> h) : h_(h) {}
  Task(Task&& o) noexcept : h_(o.h_) { o.h_ = {}; }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  Task& operator=(Task&&) = delete;
  ~Task() {
    if (h_) h_.destroy();
  }

  bool await_ready() const noexcept { return h_.done(); }
  void await_suspend(std::coroutine_handle<> awaiter) noexcept { h_.promise().continuation = awaiter; }
  void await_resume() const { rethrow(); }

  bool done() const { return h_.done(); }
  void rethrow() const {
    if (h_.promise().error) std::rethrow_exception(h_.promise().error);
  }

 private:
  std::coroutine_handle<promise_type> h_;
};

// A task run on a SimGrid actor: it ran to its end when it was called (it must not have suspended); its error, if
// it threw one, is rethrown.
void finish_on_actor(const Task& task);

class DirectEngine;

// A semaphore of the direct engine (SimGrid's Semaphore's semantics: acquire takes a unit or waits for one, release
// hands its unit to the longest waiter).
struct Semaphore {
  int64_t units = 0;
  std::deque<std::coroutine_handle<>> waiters;
};

// What a coroutine awaits: ready at once (SimGrid did the blocking, or there was nothing to wait for), or a step
// the direct engine resumes the coroutine after. `yield`: SimGrid's simcalls that return at once (a semaphore's
// release or available acquire, a pstate change) still hand the turn to the actors ready before the caller: the
// caller goes on after them, at the same time, and a released waiter runs before its releaser.
struct Blocking {
  enum class Kind { none, yield, compute, sleep, acquire };
  DirectEngine* engine = nullptr;
  Kind kind = Kind::none;
  int host = 0;
  double amount = 0;  // compute: ops; sleep: seconds
  Semaphore* semaphore = nullptr;
  bool await_ready() const noexcept { return kind == Kind::none; }
  void await_suspend(std::coroutine_handle<> h);
  void await_resume() const noexcept {}
};

class DirectEngine {
 public:
  // Each compute host's speed (ops per second) in pstate 0 and 1.
  explicit DirectEngine(std::vector<std::array<double, 2>> host_speeds);

  double now() const { return now_; }
  Blocking compute(int host, double ops);
  Blocking sleep(double seconds);
  Blocking acquire(Semaphore& s);
  Blocking release(Semaphore& s);
  Blocking set_pstate(int host, int pstate);

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
    std::array<double, 2> speed{};
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
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
};

}  // namespace dpsim::sim
