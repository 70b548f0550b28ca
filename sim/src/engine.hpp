#pragma once
// What the step program's stream coroutines (step.cpp's Run) ask of the engine that runs them, and the coroutine
// type itself. One executor, two engines: DirectEngine (direct.hpp: an event queue in virtual time, where no call lays
// flows) and SimGrid's (simgrid_engine.cpp, loaded from a plugin only when a step lays flows: see simgrid_plugin.hpp).
// What the plugin uses of it is inline (Blocking::await_suspend, which only the direct engine's coroutines reach, is in
// direct.cpp), so the plugin needs nothing of this program's but these declarations.
#include <array>
#include <coroutine>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "dpsim/error.hpp"
#include "dpsim/overlap.hpp"

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
inline void finish_on_actor(const Task& task) {
  if (!task.done()) throw RuntimeError("simulator: a stream's coroutine waited outside the direct engine");
  task.rethrow();
}

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

// A rank class's compute host: its name and its speed (ops per second) at each pstate: alone (0) and beside a
// collective of each overlap level (dpsim/overlap.hpp: ring/tree/CollNet, NVLS, NVLSTree).
using PstateSpeeds = std::array<double, kOverlapLevels>;
struct ComputeHost {
  std::string name;
  PstateSpeeds speeds{};
};

// A flow to lay on the platform: from network host `src` to `dst` (Platform's indices), `bytes` whole bytes.
struct FlowSend {
  int src = 0, dst = 0;
  uint64_t bytes = 0;
};

// A stream of the step: its name (rank class and stream), the compute host it runs beside, and the coroutine that
// runs it (started when called).
struct StreamStart {
  std::string name;
  int host = 0;
  std::function<Task()> start;
};

// The engine's primitives. SimGrid's block the calling actor and return a Blocking that is ready at once; the direct
// engine's return what the coroutine awaits.
class StepEngine {
 public:
  StepEngine() = default;
  StepEngine(const StepEngine&) = delete;
  StepEngine& operator=(const StepEngine&) = delete;
  virtual ~StepEngine() = default;

  virtual std::string name() const = 0;  // context.simulator.engine
  virtual double now() const = 0;
  virtual Blocking compute(int host, double ops) = 0;  // on compute host `host`, at its speed now
  virtual Blocking sleep(double seconds) = 0;
  virtual int semaphore() = 0;  // a new semaphore with no unit
  virtual Blocking acquire(int semaphore) = 0;
  virtual Blocking release(int semaphore) = 0;
  virtual Blocking set_pstate(int host, int pstate) = 0;
  // Lays the flows at once and returns when the last one has arrived (blocks the calling actor; SimGrid only).
  virtual void send_all(const std::vector<FlowSend>& flows) = 0;
  // Runs the step: the streams in order, the last one driving (it starts the others, SimGrid's driver pattern),
  // until none is left; a stream's exception is rethrown.
  virtual void run(std::vector<StreamStart>& streams) = 0;
};

}  // namespace dpsim::sim
