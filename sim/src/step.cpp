// One training step: the step program (core/program.cpp) walked once to queue each instruction on its stream, then
// one coroutine per stream (compute, comm) runs its queue in virtual time on an engine (engine.hpp: the direct one,
// or SimGrid's where calls lay flows), handing events over with semaphores. All ranks of a class run the same program
// on a symmetric platform, so one set of streams drives the step (driver pattern); the collectives' flows need no
// actor per rank.
#include <fmt/format.h>
#include <sys/resource.h>
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "direct.hpp"
#include "dpsim/analytic.hpp"
#include "dpsim/collective_algorithm.hpp"
#include "dpsim/cost.hpp"
#include "dpsim/error.hpp"
#include "dpsim/estimate.hpp"
#include "dpsim/program.hpp"
#include "dpsim/sim/simulate.hpp"
#include "dpsim/training_cost.hpp"
#include "dpsim/units.hpp"
#include "fluid.hpp"
#include "group_space.hpp"
#include "platform.hpp"
#include "simgrid_plugin.hpp"

namespace dpsim {

namespace sim {
namespace {

constexpr double kProbeBytes = 1 << 30;  // payload of the fast fidelity's pattern probes

using Clock = std::chrono::steady_clock;

class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled), start_(Clock::now()) {}
  void tick(const char* phase, size_t done, size_t total) {
    if (!enabled_ || ++calls_ % 64 != 0) return;
    const auto now = Clock::now();
    if (now - start_ < std::chrono::seconds(1) || now - last_ < std::chrono::milliseconds(200)) return;
    last_ = now;
    shown_ = true;
    std::fprintf(stderr, "\rdpsim predict: %s %zu/%zu, %.1f s wall   ", phase, done, total,
                 std::chrono::duration<double>(now - start_).count());
    std::fflush(stderr);
  }
  ~Progress() {
    if (shown_) std::fprintf(stderr, "\r%60s\r", "");
  }

 private:
  bool enabled_;
  Clock::time_point start_, last_{};
  long calls_ = 0;
  bool shown_ = false;
};

const std::vector<const FlowSpace*> kNoSpaces;

struct CallRun {
  CollectiveKind kind = CollectiveKind::all_reduce;
  CollectiveCost cost;
  const AlgorithmDescriptor* algorithm = nullptr;
  int overlap_level = 1;  // what it does to the compute beside it (dpsim/overlap.hpp)
  // Every group of the call's kind runs it at once (all ranks run the program): the class's list for the kind (one per
  // kind, not per call: 16,384 tensor groups x 8,380 calls were 1 GB at 131,072 GPUs), or none (sends between stages).
  const std::vector<const FlowSpace*>* spaces = &kNoSpaces;
  double wire_factor = 1;  // wire bytes per payload byte: 1 / protocol efficiency
  bool moves = false;      // its group has more than one rank
  double ready = -1, start = 0, end = 0;
  int stream = 0;
  const CommCall* call = nullptr;
};

// An event of the program: when it was recorded and the semaphore its waiters block on (the engine's, made when
// first used).
struct EventState {
  bool recorded = false;
  double time = 0;
  int waiters = 0;
  int sem = -1;
};

// The simulator's executor of the step program: walking the program queues each instruction on its stream; a
// coroutine per stream then runs its queue in virtual time, handing events over with semaphores.
struct Run final : StepExecutor {
  const Scenario* scenario = nullptr;
  const StepPlan* plan = nullptr;
  const StepProgram* program = nullptr;
  const RankProgram* rank = nullptr;
  int host = 0;  // its compute host (pipeline stages compute at once, each on its own)
  // Events that cross rank classes (pipeline sends), shared by every class's Run; the others are this Run's own.
  EventMap<EventState>* crossed = nullptr;
  SimOptions options;
  Platform* platform = nullptr;
  StepEngine* engine = nullptr;  // runs this Run's coroutines (engine.hpp)
  ComputeModel cm;
  OpSeconds op_s;                                                   // of plan->ops under cm
  std::vector<CallRun> calls;                                       // per RankProgram::comms
  std::map<GroupKind, std::vector<GroupSpace>> group_spaces_;       // kinds whose groups are not the world
  std::map<GroupKind, std::vector<const FlowSpace*>> space_lists_;  // spaces_for()
  bool probe_shortcut = true;  // fast fidelity: calls never share links while they overlap (see probe_patterns)
  std::map<std::tuple<Algorithm, CollectiveKind, GroupKind>, double> seconds_per_byte;  // fast fidelity, per wire byte
  std::vector<std::vector<Instr>> queues;                                               // per stream, in issue order
  EventMap<EventState> events_;
  std::map<std::pair<int, int>, double> marks;           // (mark, index) -> time
  bool synced_backward_done = false;                     // collectives started before it slow the backward beside them
  std::array<int, kOverlapLevels> active_collectives{};  // running now on a comm stream, per overlap level
  std::array<double, kOverlapLevels> slowdowns{};        // of the compute beside each level (overlap_slowdowns)
  double t0 = 0, comm_end = 0, optimizer_start = -1, step_end = 0;
  double forward_sum = 0, backward_sum = 0;
  std::array<double, 2> blocking_s{0, 0};  // tensor and context collectives on the compute stream: forward, backward
  double context_s = 0;                    // of those, context parallelism's ring exchanges
  std::array<double, 3> busy_s{0, 0, 0};   // compute per Phase
  double p2p_s = 0, bubble_s = 0, waited_comm_s = 0;  // the compute stream: sends; waits for other stages, own calls
  std::vector<TimelineEvent> timeline;
  std::vector<std::vector<const Instr*>> executed;  // per stream, in run order (SimOptions::record_program)
  int64_t events = 0, flows = 0;
  size_t backward_done_ops = 0, backward_ops = 0;
  Progress progress{false};

  // Issue: walking the program fills the stream queues.
  void queue(const Instr& in) { queues[static_cast<size_t>(in.stream)].push_back(in); }
  void forward(const Instr& in) override { queue(in); }
  void backward(const Instr& in) override {
    queue(in);
    ++backward_ops;
  }
  void collective(const Instr& in, const CommCall&) override { queue(in); }
  void record(const Instr& in) override { queue(in); }
  EventMap<EventState>& events_of(EventKind kind) {
    if (!crosses_classes(kind)) return events_;
    if (!crossed) throw RuntimeError(fmt::format("{}: a cross-class event in a one-class run", to_string(kind)));
    return *crossed;
  }
  void wait(const Instr& in) override {
    queue(in);
    ++events_of(in.event.kind)[in.event].waiters;
  }
  void unflatten(const Instr& in) override { queue(in); }
  void optimizer(const Instr& in) override { queue(in); }
  void mark(const Instr& in) override { queue(in); }

  // The engine's primitives: SimGrid's (which block the actor; the coroutine goes on at once) or the direct engine's.
  double clock() const { return engine->now(); }
  double now() const { return clock() - t0; }
  Blocking compute_for(double seconds) { return engine->compute(host, seconds * kComputeOpsPerSecond); }
  Blocking sleep_for(double seconds) { return engine->sleep(seconds); }
  int semaphore_of(EventState& e) {
    if (e.sem < 0) e.sem = engine->semaphore();
    return e.sem;
  }
  Blocking acquire(EventState& e) { return engine->acquire(semaphore_of(e)); }
  Blocking release(EventState& e) { return engine->release(semaphore_of(e)); }
  Blocking set_pstate(int pstate) { return engine->set_pstate(host, pstate); }

  // A compute op named `prefix` + `name` (built only where the timeline is kept: SimOptions::timeline).
  Task compute(const char* prefix, const std::string& name, double seconds, Phase phase) {
    const double start = now();
    co_await compute_for(seconds);
    ++events;
    busy_s[static_cast<size_t>(phase)] += now() - start;
    if (options.timeline)
      timeline.push_back({rank->stage < 0 ? 0 : rank->stage, "compute", prefix + name, start, now()});
  }

  // The bytes flow `f` (of a pattern for one payload byte) moves for `bytes`: whole bytes, as the engine counts
  // them; 0 where it moves nothing (no bytes, or a host to itself).
  static uint64_t flow_size(const Flow& f, double bytes) {
    return f.src == f.dst ? 0 : static_cast<uint64_t>(std::llround(f.bytes * bytes));
  }

  // Calls `send(src, dst, bytes)` for each flow of `pattern` scaled to `bytes` that moves something, and counts it.
  template <class Send>
  void each_flow(const std::vector<Flow>& pattern, double bytes, Send&& send) {
    for (const Flow& f : pattern) {
      const uint64_t size = flow_size(f, bytes);
      if (size == 0) continue;
      send(f.src, f.dst, size);
      ++flows;
      ++events;
    }
  }

  // Starts `pattern` scaled to `bytes` and waits for all of its flows.
  void run_flows(const std::vector<Flow>& pattern, double bytes) {
    std::vector<FlowSend> sends;
    sends.reserve(pattern.size());
    each_flow(pattern, bytes, [&](int src, int dst, uint64_t size) { sends.push_back({src, dst, size}); });
    engine->send_all(sends);
  }

  // The time `pattern` scaled to kProbeBytes takes alone on the platform: the same max-min sharing as the engine's
  // flows, solved without it (fluid.hpp says why).
  double probe_seconds(const std::vector<Flow>& pattern) {
    std::vector<FluidFlow> fluid;
    fluid.reserve(pattern.size());
    each_flow(pattern, kProbeBytes, [&](int src, int dst, uint64_t size) {
      fluid.push_back({static_cast<double>(size), platform->route_links(src, dst)});
    });
    return fluid_makespan_s(fluid, platform->link_capacities());
  }

  // The call's flows on every space it runs on, per payload byte: the whole call (fast fidelity), or one of its
  // NCCL steps for `bytes` (step fidelity, `per_step`).
  std::vector<Flow> pattern(const CallRun& c, bool per_step, double wire_factor, double bytes = 0) const {
    std::vector<Flow> flows_;
    for (const FlowSpace* space : *c.spaces) {
      const auto part = per_step ? step_round(*c.algorithm, *space, step_call(c, bytes), scenario->nccl)
                                 : c.algorithm->flows(*space, c.kind);
      flows_.insert(flows_.end(), part.begin(), part.end());
    }
    for (Flow& f : flows_) f.bytes *= wire_factor;
    return flows_;
  }
  StepCall step_call(const CallRun& c, double bytes) const {
    return {c.kind, bytes, c.cost.protocol, scenario->topology.gpu.arch};
  }
  // Step fidelity: NCCL's steps of the call (every space of a kind is the same shape: the first one's).
  int steps_of(const CallRun& c, double bytes) const {
    return c.algorithm->steps(*c.spaces->front(), step_call(c, bytes), scenario->nccl);
  }

  // Where calls lay flows (step fidelity, or fast fidelity's calls that are not probed), the activities the engine
  // will run, counted before it starts: a compute op or a sleep per instruction that runs one, and per call the flows
  // that move something: its NCCL steps x a step's (step fidelity), or its whole pattern once (fast).
  double flow_events() const {
    const bool per_step = options.fidelity == Fidelity::step;
    double total = compute_events();
    for (size_t i = 0; i < calls.size(); ++i) {
      const CallRun& c = calls[i];
      const double bytes = rank->comms[i].bytes;
      if (!c.moves) continue;
      // between stages, beside a GEMM or the attention (tp_overlap: what it exposes), or probed: one sleep
      if (c.spaces->empty() || c.call->tp_overlap != TpOverlap::none || (!per_step && probe_shortcut)) {
        total += 1;
        continue;
      }
      double moving = 0;
      for (const Flow& f : pattern(c, per_step, c.wire_factor, bytes)) moving += flow_size(f, bytes) > 0 ? 1 : 0;
      total += (per_step ? steps_of(c, bytes) : 1) * moving;
    }
    return total;
  }
  // The compute activities of the queued program: one per forward, backward and optimizer op, one for the copy back
  // into the buckets where there is one.
  double compute_events() const {
    double total = 0;
    for (const auto& q : queues)
      for (const Instr& in : q) {
        if (in.type == Instr::Type::forward || in.type == Instr::Type::backward || in.type == Instr::Type::optimizer)
          total += 1;
        if (in.type == Instr::Type::unflatten && final_copy_bytes_of(*plan, rank->stage) > 0) total += 1;
      }
    return total;
  }

  // Fast fidelity's shortcut: the platform time of each algorithm's flow pattern, simulated once on the whole
  // flow set. Exact where collectives are serialized on one comm stream (DDP's buckets, and FSDP's gathers and
  // reduce-scatters on the data group's NCCL stream): a call's flows then have the network to themselves, and
  // the fluid model's time scales exactly with the bytes (and with the protocol's wire bytes). It stays exact with
  // several comm streams whose calls cross disjoint links (HSDP's shard groups inside the nodes, its replica
  // groups through the NICs: streams_disjoint); otherwise each call's flows run, at the same time as the others
  // (tests/sim/test_concurrent.cpp shows the difference).
  static std::tuple<Algorithm, CollectiveKind, GroupKind> probe_key(const CallRun& c, const CommCall& call) {
    return {c.cost.algorithm, c.kind, call.group};
  }
  void probe_patterns() {
    for (size_t i = 0; i < calls.size(); ++i) {
      const CallRun& c = calls[i];
      if (!c.moves) continue;
      const auto key = probe_key(c, rank->comms[i]);
      if (seconds_per_byte.count(key)) continue;
      seconds_per_byte[key] = probe_seconds(pattern(c, false, 1.0)) / kProbeBytes;
    }
  }

  Task run_collective(const CallRun& c, double bytes) {
    // NCCL's model time = latency + pipeline fill + bandwidth term; links bound only the bandwidth term.
    const double fill_s = c.cost.fill_s;
    const double model_bw_s = std::max(0.0, c.cost.time_s - c.cost.latency_s - fill_s);
    const double launch_s = scenario->nccl.framework_launch_overhead_s;  // PyTorch's launch of this call
    if (c.spaces->empty()) {  // between stages: NCCL's cost over the pair's fabric, no flows laid (no contention)
      co_await sleep_for(launch_s + c.cost.time_s);
      ++events;
      co_return;
    }
    if (options.fidelity == Fidelity::fast && probe_shortcut) {
      const double alone_s = seconds_per_byte.at(probe_key(c, *c.call)) * bytes * c.wire_factor;
      co_await sleep_for(launch_s + c.cost.latency_s + fill_s + std::max(model_bw_s, alone_s));
      ++events;
      co_return;
    }
    if (options.fidelity == Fidelity::fast) {  // the call's flows, sharing the links with any call beside it
      co_await sleep_for(launch_s + c.cost.latency_s + fill_s);
      const double start = clock();
      run_flows(pattern(c, false, c.wire_factor), bytes);
      const double platform_s = clock() - start;
      if (model_bw_s > platform_s) co_await sleep_for(model_bw_s - platform_s);
      co_return;
    }
    // Step fidelity: NCCL's steps (the algorithm's own) as synchronized rounds of messages, each after its share of
    // the latency.
    const int steps = steps_of(c, bytes);
    const std::vector<Flow> round = pattern(c, true, c.wire_factor, bytes);
    if (launch_s + fill_s > 0) co_await sleep_for(launch_s + fill_s);
    const double start = clock();
    double latency_paid = 0;
    for (int s = 0; s < steps; ++s) {
      const double lat = c.cost.latency_s / steps;
      co_await sleep_for(lat);
      latency_paid += lat;
      run_flows(round, bytes);
    }
    const double platform_s = clock() - start - latency_paid;
    if (model_bw_s > platform_s) co_await sleep_for(model_bw_s - platform_s);
  }

  // The pstate of the compute now: the overlap level of the running collectives that slows it most (0: none).
  int beside() const {
    int level = 0;
    for (int k = 1; k < kOverlapLevels; ++k)
      if (active_collectives[static_cast<size_t>(k)] > 0 &&
          (level == 0 || slowdowns[static_cast<size_t>(k)] > slowdowns[static_cast<size_t>(level)]))
        level = k;
    return level;
  }

  Task do_collective(const Instr& in) {
    CallRun& c = calls[static_cast<size_t>(in.comm)];
    const CommCall& call = rank->comms[static_cast<size_t>(in.comm)];
    const EventState* ready = events_.find(call.inputs_ready);
    c.ready = call.inputs_ready.kind == EventKind::none ? now() : ready && ready->recorded ? ready->time : -1;
    c.start = now();
    c.stream = in.stream;
    const bool blocking = in.stream == StepProgram::kCompute;  // tensor/pipeline parallelism's: nothing beside it
    if (c.moves) {
      // The collective slows the compute beside it; with several at once, the one that slows it most (beside()).
      const auto level = static_cast<size_t>(c.overlap_level);
      if (!blocking) ++active_collectives[level];
      if (!blocking && !synced_backward_done) co_await set_pstate(beside());
      if (call.tp_overlap != TpOverlap::none)  // beside its GEMM (TE's or Megatron-Core's; no flows): what it exposes
        co_await sleep_for(blocking_call_s(call, c.cost.time_s, op_s, program->dims.tensor,
                                           scenario->topology.gpu.sm_count, scenario->nccl));
      else
        co_await run_collective(c, call.bytes);
      if (!blocking) {
        const int was = beside();
        --active_collectives[level];
        const int left = beside();
        if (left == 0 || (left != was && !synced_backward_done)) co_await set_pstate(left);
      }
    }
    c.end = now();
    if (blocking && between_stages(call))
      p2p_s += c.end - c.start;
    else if (blocking) {
      blocking_s[call.backward ? 1 : 0] += c.end - c.start;
      if (call.group == GroupKind::context) context_s += c.end - c.start;
    } else
      comm_end = std::max(comm_end, c.end);
    if (options.timeline)
      timeline.push_back({0, program->streams[static_cast<size_t>(in.stream)],
                          fmt::format("{}{} b{} {} {}/{}", call.group == GroupKind::context ? "context-parallel " : "",
                                      label(call.kind), call.index, format_bytes(call.bytes),
                                      to_string(c.cost.algorithm), to_string(c.cost.protocol)),
                          c.start, c.end});
    progress.tick("bucket", static_cast<size_t>(in.comm) + 1, calls.size());
  }

  Task do_record(const Instr& in) {
    EventState& e = events_of(in.event.kind)[in.event];
    e.recorded = true;
    e.time = now();
    for (int i = 0; i < e.waiters; ++i) co_await release(e);
  }

  Task do_wait(const Instr& in) {
    EventState& e = events_of(in.event.kind).at(in.event);
    const double start = now();
    co_await acquire(e);  // released once per waiter when recorded (at once if it already was)
    if (in.stream == StepProgram::kCompute)
      (crosses_classes(in.event.kind) ? bubble_s : waited_comm_s) += now() - start;
  }

  void do_mark(const Instr& in) {
    marks[{static_cast<int>(in.mark), in.mark_index}] = now();
    if (in.mark == Mark::backward_end && in.mark_index == program->micro_steps - 1) synced_backward_done = true;
    if (in.mark == Mark::optimizer_end) step_end = now();
  }

  Task execute(const Instr& in) {
    switch (in.type) {
      case Instr::Type::forward:
        co_await compute("fwd ", plan->ops[static_cast<size_t>(in.op)].name,
                         op_s.forward.at(static_cast<size_t>(in.op)), Phase::forward);
        break;
      case Instr::Type::backward:
        co_await compute("bwd ", plan->ops[static_cast<size_t>(in.op)].name,
                         op_s.backward.at(static_cast<size_t>(in.op)), Phase::backward);
        progress.tick("backward op", ++backward_done_ops, backward_ops);
        break;
      case Instr::Type::collective: co_await do_collective(in); break;
      case Instr::Type::record: co_await do_record(in); break;
      case Instr::Type::wait: co_await do_wait(in); break;
      case Instr::Type::unflatten:
        if (optimizer_start < 0) optimizer_start = now();
        if (final_copy_bytes_of(*plan, rank->stage) > 0)
          co_await compute("", "copy buckets back", memory_seconds(final_copy_bytes_of(*plan, rank->stage), cm),
                           Phase::optimizer);
        break;
      case Instr::Type::optimizer:
        if (optimizer_start < 0) optimizer_start = now();
        co_await compute("", "optimizer", optimizer_seconds(optimizer_of(*plan, rank->stage), cm), Phase::optimizer);
        break;
      case Instr::Type::mark: do_mark(in); break;
    }
  }

  Task stream_actor(int stream) {
    for (const Instr& in : queues[static_cast<size_t>(stream)]) {
      co_await execute(in);
      if (options.record_program) executed[static_cast<size_t>(stream)].push_back(&in);  // described after the run
    }
  }

  // Whether no link carries calls of two comm streams (each stream runs its calls one at a time, so calls that
  // overlap in time are on different streams): the links of each (stream, algorithm, kind, group) pattern, from
  // the platform's routes.
  bool streams_disjoint() const {
    std::map<int, std::pair<int, int>> owner;
    return links_disjoint(owner);
  }
  // The same across rank classes: `owner` maps each link to the (class, stream) whose calls use it.
  bool links_disjoint(std::map<int, std::pair<int, int>>& owner) const {
    std::set<std::tuple<int, Algorithm, CollectiveKind, GroupKind>> seen;
    for (const Instr& in : rank->instrs) {
      if (in.type != Instr::Type::collective) continue;
      const CallRun& c = calls[static_cast<size_t>(in.comm)];
      if (!c.moves || c.call->tp_overlap != TpOverlap::none) continue;  // beside a GEMM or the attention: no flows
      const auto [algorithm, kind, group] = probe_key(c, *c.call);
      if (!seen.insert({in.stream, algorithm, kind, group}).second) continue;
      for (const Flow& f : pattern(c, false, 1.0)) {
        if (f.src == f.dst) continue;
        std::vector<int> links;
        platform->route(f.src, f.dst, links);
        for (int l : links) {
          const std::pair<int, int> mine{host, in.stream};
          const auto [it, added] = owner.emplace(l, mine);
          if (!added && it->second != mine) return false;
        }
      }
    }
    return true;
  }

  // The spaces a call over groups of `kind` runs on: made once per kind, shared by its calls.
  const std::vector<const FlowSpace*>* spaces_for(GroupKind kind) {
    if (const auto it = space_lists_.find(kind); it != space_lists_.end()) return &it->second;
    std::vector<const FlowSpace*>& out = space_lists_[kind];
    if (spans_world(kind, program->dims)) {
      out.push_back(platform);
      return &out;
    }
    auto it = group_spaces_.find(kind);
    if (it == group_spaces_.end())
      it = group_spaces_.emplace(kind, group_spaces(*platform, scenario->topology, kind, program->dims, rank->stage))
               .first;
    for (const GroupSpace& g : it->second) out.push_back(&g);
    return &out;
  }

  double mark_at(Mark m, int index) const { return marks.at({static_cast<int>(m), index}); }

  // "all-reduce", "reduce-scatter": the kind's name as people write it in a trace.
  static std::string label(CollectiveKind kind) {
    std::string name = to_string(kind);
    std::replace(name.begin(), name.end(), '_', '-');
    return name;
  }
};

// The time a class's comm streams spent in collectives.
double comm_streams_busy_s(const Run& run) {
  double busy = 0;
  for (const CallRun& c : run.calls)
    if (c.stream != StepProgram::kCompute) busy += c.end - c.start;
  return busy;
}

// A class's calls into the result: its DDP buckets into buckets[]; with `entries`, its calls into comm[].
void collect_calls(const Run& run, const StepProgram& program, bool entries, StepResult& r) {
  for (size_t i = 0; i < run.rank->comms.size(); ++i) {
    const CallRun& c = run.calls[i];
    const CommCall& call = run.rank->comms[i];
    if (entries)
      r.comm.push_back(comm_timing(call, program.streams[static_cast<size_t>(c.stream)], c.ready, c.start, c.end,
                                   c.moves ? &c.cost : nullptr));
    if (call.bucket < 0) continue;
    const auto& pb = run.plan->buckets[static_cast<size_t>(call.bucket)];
    r.buckets.push_back({pb.index, static_cast<long long>(pb.bytes), c.ready, c.start, c.end,
                         c.moves ? to_string(c.cost.algorithm) : "none",
                         c.moves ? to_string(c.cost.protocol) : "none"});
  }
}

// The result of a one-class step (no pipeline): the phases from the compute stream's marks.
void one_class_result(Run& run, const StepProgram& program, StepResult& r) {
  const auto k = static_cast<double>(program.micro_steps);
  const double micro = run.forward_sum + run.backward_sum;
  for (int m = 0; m < program.micro_steps; ++m) {
    r.forward_s += run.mark_at(Mark::forward_end, m) - run.mark_at(Mark::forward_begin, m);
    r.backward_s += run.mark_at(Mark::backward_end, m) - run.mark_at(Mark::forward_end, m);
  }
  // Tensor and context parallelism's collectives are reported apart from the compute they interrupt.
  r.context_comm_s = run.context_s;
  r.tensor_comm_s = run.blocking_s[0] + run.blocking_s[1] - run.context_s;
  r.forward_s -= run.blocking_s[0];
  r.backward_s -= run.blocking_s[1];
  const double backward_end = run.mark_at(Mark::backward_end, program.micro_steps - 1);
  r.optimizer_s = run.step_end - run.optimizer_start;
  r.step_time_s = run.step_end;
  collect_calls(run, program, true, r);
  r.comm_busy_s = comm_streams_busy_s(run);
  const double single_gpu_s =
      k * micro + optimizer_seconds(run.plan->optimizer, run.cm) + memory_seconds(run.plan->final_copy_bytes, run.cm);
  // DDP: what the last all-reduce adds after the backward; sharded: everything the compute waited for (gathers in
  // the forward and backward too), and what running beside collectives slowed it by.
  r.exposed_comm_s = run.plan->sharded.sharding == Sharding::none
                         ? std::max(0.0, run.comm_end - backward_end)
                         : std::max(0.0, r.step_time_s - single_gpu_s - r.blocking_comm_s());
  r.no_overlap_step_s = single_gpu_s + r.blocking_comm_s() + r.comm_busy_s;
  fill_throughput(*run.plan, r);
  r.scaling_efficiency = r.step_time_s > 0 ? single_gpu_s / r.step_time_s : 0;
  fill_training_cost(*run.scenario, r);
  r.timeline = std::move(run.timeline);
}

// The result of a pipeline step: each stage's Run as its compute stream spent the step (report_stages picks what
// step.* shows); comm[] and buckets[] of every stage, stage 0's first.
void pipeline_result(std::vector<std::unique_ptr<Run>>& runs, const StepProgram& program, StepResult& r) {
  for (auto& one : runs) {
    Run& run = *one;
    r.stages.push_back({run.rank->stage, run.busy_s[0], run.busy_s[1], run.busy_s[2],
                        run.blocking_s[0] + run.blocking_s[1] - run.context_s, run.p2p_s, run.waited_comm_s,
                        comm_streams_busy_s(run), run.bubble_s, run.step_end, 0, run.context_s});
    collect_calls(run, program, run.rank->stage == 0, r);  // comm[]: the first stage's calls
    r.timeline.insert(r.timeline.end(), run.timeline.begin(), run.timeline.end());
  }
  std::sort(r.buckets.begin(), r.buckets.end(),
            [](const BucketTiming& a, const BucketTiming& b) { return a.index < b.index; });
  report_stages(*runs.front()->plan, r);
  const StageTiming& t = r.stages.at(static_cast<size_t>(r.reported_stage));
  fill_throughput(*runs.front()->plan, r);
  r.scaling_efficiency = r.step_time_s > 0 ? (t.forward_s + t.backward_s + t.optimizer_s) / r.step_time_s : 0;
  fill_training_cost(*runs.front()->scenario, r);
}

// Fast fidelity's pattern probes, before the step runs.
void probe(std::vector<std::unique_ptr<Run>>& runs) {
  for (auto& one : runs)
    if (one->options.fidelity == Fidelity::fast && one->probe_shortcut && one->plan->world_size > 1)
      one->probe_patterns();
}

// Whether the direct engine runs the step (direct.hpp): no call lays flows (fast fidelity, every class's calls
// probed), and compute ops only on each class's compute stream (one op at a time per compute host).
bool runs_direct(const std::vector<std::unique_ptr<Run>>& runs, const SimOptions& options) {
  if (!options.direct_engine || options.fidelity != Fidelity::fast) return false;
  for (const auto& one : runs) {
    if (!one->probe_shortcut) return false;
    for (size_t st = 0; st < one->queues.size(); ++st)
      for (const Instr& in : one->queues[st])
        if (st != static_cast<size_t>(StepProgram::kCompute) &&
            (in.type == Instr::Type::forward || in.type == Instr::Type::backward || in.type == Instr::Type::optimizer ||
             in.type == Instr::Type::unflatten))
          return false;
  }
  return true;
}

// Runs the step: the same coroutines on either engine, started in the order SimGrid runs its actors (the first
// class's compute stream, the driver, creates the other streams' actors, each of which runs before it goes on).
void run_step(std::vector<std::unique_ptr<Run>>& runs, StepEngine& engine) {
  probe(runs);
  std::vector<StreamStart> streams;
  for (auto& one : runs) {
    Run* r = one.get();
    r->engine = &engine;
    r->t0 = 0;
    for (size_t st = one == runs.front() ? 1 : 0; st < r->queues.size(); ++st)
      streams.push_back({fmt::format("{} {}", r->rank->rank_class, r->program->streams[st]), r->host,
                         [r, st] { return r->stream_actor(static_cast<int>(st)); }});
  }
  Run* first = runs.front().get();
  streams.push_back({"step", first->host, [first] { return first->stream_actor(StepProgram::kCompute); }});
  engine.run(streams);
}

}  // namespace
}  // namespace sim

const char* to_string(Fidelity fidelity) { return fidelity == Fidelity::fast ? "fast" : "step"; }

Fidelity parse_fidelity(const std::string& text) {
  if (text == "fast") return Fidelity::fast;
  if (text == "step") return Fidelity::step;
  throw InputError(fmt::format("--fidelity: expected fast or step, got \"{}\"", text));
}

double estimated_fast_events(const StepPlan& plan) {
  const double ops = 2.0 * static_cast<double>(plan.ops.size()) *
                         static_cast<double>(std::max<int64_t>(1, plan.gradient_accumulation)) +
                     2;
  return ops + 4.0 * static_cast<double>(plan.buckets.size());
}

namespace {
// What the simulating process holds per GPU of the world: dpsim's own cost, not a modelled system's. The full platform
// (every GPU a host, its links; calls over groups that are not the world need it) and the reduced one (fast fidelity,
// every call over the whole world).
struct BytesPerGpu {
  double full, reduced;
};
// The direct engine (max RSS of dpsim-sim, less the same step's at 2 nodes): full 0.66 KB (Llama 3.1 70B tensor 8 x
// data, llama3.1-70b-tp8-64xh100 at 131,072 nodes: 704.6 MB, 29.1 MB at 2 nodes), reduced 0.15 KB (Llama 3.1 8B DDP,
// llama3.1-8b-16384xh100-ib at 131,072 nodes: 158.8 MB, 8.1 MB at 2 nodes).
constexpr BytesPerGpu kDirectBytesPerGpu{0.66e3, 0.15e3};
// SimGrid 3.32's engine, measured with dpsim_bench_sim (RSS): full 13.3 KB (Llama 3.1 70B tensor 8 x data: 129.0 MB
// at 8,192 GPUs, 891.8 MB at 65,536), reduced 0.6 KB (Llama 3.1 8B DDP at 1,048,576 GPUs: 597 MB).
constexpr BytesPerGpu kSimgridBytesPerGpu{13.3e3, 0.6e3};
}  // namespace

double estimated_memory_bytes(const StepPlan& plan, bool reduced_platform, bool simgrid_engine) {
  const BytesPerGpu& per_gpu = simgrid_engine ? kSimgridBytesPerGpu : kDirectBytesPerGpu;
  return static_cast<double>(plan.world_size) * (reduced_platform ? per_gpu.reduced : per_gpu.full);
}

namespace {
void refuse_above_events(const StepPlan& plan, const SimOptions& options, double events) {
  if (events <= options.max_events) return;
  throw InputError(fmt::format(
      "{} fidelity would simulate about {:.3g} events for {} GPUs and {} buckets, above the limit of {:.3g} "
      "(raise it with --max-events{})",
      to_string(options.fidelity), events, plan.world_size, plan.buckets.size(), options.max_events,
      options.fidelity == Fidelity::step ? ", or use --fidelity fast" : ""));
}

void refuse_above_memory(const StepPlan& plan, bool reduced_platform, bool simgrid_engine, const SimOptions& options) {
  const double bytes = estimated_memory_bytes(plan, reduced_platform, simgrid_engine);
  if (bytes <= options.max_memory_bytes) return;
  throw InputError(fmt::format(
      "the simulation would hold about {} for {} GPUs ({} platform{}, {}), above the limit of {} (raise it with "
      "--max-memory)",
      format_bytes(bytes), plan.world_size, reduced_platform ? "the reduced" : "the full",
      reduced_platform ? "" : ": calls over groups that are not the whole world lay every GPU and NIC as a host",
      simgrid_engine ? "on SimGrid's engine: its calls lay flows" : "on the direct engine",
      format_bytes(options.max_memory_bytes)));
}
}  // namespace

namespace {
// The step on the direct engine where it can (runs_direct), else on SimGrid's (loaded from its plugin here:
// simgrid_plugin.hpp); nothing where it would be SimGrid's and `simgrid` is false (simulate() then runs it in a child
// process). Runs above the event or memory limits are refused before either engine starts.
std::optional<StepResult> simulate_on(const Scenario& scenario, const StepPlan& plan, const SimOptions& options,
                                      SimStats* stats, bool simgrid) {
  using namespace sim;
  const auto wall_start = Clock::now();
  if (options.fidelity == Fidelity::fast) refuse_above_events(plan, options, estimated_fast_events(plan));

  ProgramOptions po;
  po.overlap = options.overlap;
  const StepProgram built = options.program ? StepProgram{} : make_step_program(plan, po);
  const StepProgram& program = options.program ? *options.program : built;
  // The reduced platform (fast fidelity) serves calls whose one group is the whole world; groups of a kind that
  // has several (a data group beside tensor parallelism) need every GPU and NIC as they are.
  bool world_groups = true;
  for (const RankProgram& c : program.classes)
    for (const CommCall& call : c.comms) world_groups = world_groups && spans_world(call.group, program.dims);
  const auto classes = static_cast<int>(program.classes.size());
  const bool reduced = options.fidelity == Fidelity::fast && world_groups;
  refuse_above_memory(plan, reduced, false, options);  // the direct engine's, the least any engine holds
  Platform platform(scenario, reduced, classes);

  // One Run per rank class (pipeline stages: each on its own compute host, their sends' events shared).
  EventMap<EventState> crossed;
  std::vector<std::unique_ptr<Run>> runs;
  for (int k = 0; k < classes; ++k) {
    runs.push_back(std::make_unique<Run>());
    Run& run = *runs.back();
    const RankProgram& rank = program.classes[static_cast<size_t>(k)];
    run.scenario = &scenario;
    run.plan = &plan;
    run.program = &program;
    run.rank = &rank;
    run.host = k;
    run.crossed = &crossed;
    run.options = options;
    run.platform = &platform;
    run.cm = compute_model(scenario);
    run.progress = Progress(options.progress && k == 0);
    run.queues.resize(program.streams.size());
    // One comm stream, no collective on the compute stream, one class; otherwise see streams_disjoint below.
    run.probe_shortcut = classes == 1 && program.streams.size() == 2 &&
                         std::none_of(rank.instrs.begin(), rank.instrs.end(), [](const Instr& i) {
                           return i.type == Instr::Type::collective && i.stream == StepProgram::kCompute;
                         });
    run.executed.resize(program.streams.size());
    run.op_s = op_seconds(plan.ops, run.cm);
    for (size_t o = 0; o < plan.ops.size(); ++o) {
      run.forward_sum += run.op_s.forward[o];
      run.backward_sum += run.op_s.backward[o];
    }
    CallCosts costs(scenario, program, rank);
    run.slowdowns = overlap_slowdowns(scenario.nccl, scenario.topology.gpu);
    run.calls.reserve(rank.comms.size());
    for (const CommCall& call : rank.comms) {
      CallRun c;
      c.kind = call.kind;
      c.moves = costs.moves(call);  // a group of one rank moves nothing
      if (c.moves) {
        c.cost = costs.cost(call);
        c.algorithm = &algorithm_descriptor(c.cost.algorithm);  // the cost chose it where it runs
        c.overlap_level = overlap_level(c.cost.algorithm);
        // sends are timed, not laid; so are context parallelism's ring exchanges (beside the attention)
        if (!between_stages(call) && call.group != GroupKind::context) c.spaces = run.spaces_for(call.group);
        const double eff = scenario.nccl.protocol_efficiency.get(c.cost.protocol);
        if (!(eff > 0))
          throw InputError(fmt::format("protocol_efficiency.{}: must be > 0", to_string(c.cost.protocol)));
        c.wire_factor = 1.0 / eff;
      }
      c.call = &call;
      run.calls.push_back(c);
    }
    if (classes == 1 && !run.probe_shortcut && options.fidelity == Fidelity::fast && plan.world_size > 1)
      run.probe_shortcut = run.streams_disjoint();
    walk_program(program, rank, run);  // queues every instruction on its stream
  }
  Run& run = *runs.front();
  if (classes > 1 && options.fidelity == Fidelity::fast) {  // the stages' calls on links no other stage or stream uses
    std::map<int, std::pair<int, int>> owner;
    bool disjoint = true;
    for (auto& one : runs) disjoint = disjoint && one->links_disjoint(owner);
    for (auto& one : runs) one->probe_shortcut = disjoint;
  }
  // Where calls lay flows: every flow they lay, counted on the platform they will run on, and SimGrid's memory.
  const bool direct = runs_direct(runs, options);
  double flow_events = 0;
  if (!direct) {
    for (const auto& one : runs) flow_events += one->flow_events();
    refuse_above_events(plan, options, flow_events);
    refuse_above_memory(plan, reduced, true, options);
  }

  std::unique_ptr<StepEngine> engine;
  if (direct) {
    std::vector<PstateSpeeds> speeds;
    for (const ComputeHost& h : platform.compute_hosts()) speeds.push_back(h.speeds);
    engine = std::make_unique<DirectEngine>(std::move(speeds));
  } else if (simgrid) {
    engine = make_simgrid_engine(platform);
  } else {
    return std::nullopt;
  }
  const auto sim_start = Clock::now();
  run_step(runs, *engine);
  const double sim_wall = std::chrono::duration<double>(Clock::now() - sim_start).count();

  // The result.
  StepResult r;
  r.mode = "predict";
  fill_common(scenario, plan, program, r);
  if (classes > 1) {
    pipeline_result(runs, program, r);
  } else {
    one_class_result(run, program, r);
  }
  // The engine that ran the step. The network model is the sharing of SimGrid's flows and of the fluid probes alike.
  r.context["simulator"] = {
      {"engine", engine->name()},
      {"network_model", "CM02, crosstraffic 0, TCP-gamma 0"},
      {"fidelity", to_string(options.fidelity)},
      {"overlap", options.overlap},
      {"overlap_slowdown", scenario.nccl.overlap_slowdown},
      {"overlap_slowdown_by_algorithm",
       {{"ring_tree_collnet", run.slowdowns[1]}, {"nvls", run.slowdowns[2]}, {"nvlstree", run.slowdowns[3]}}}};

  if (stats) {
    stats->simulate_wall_s = sim_wall;
    stats->wall_s = std::chrono::duration<double>(Clock::now() - wall_start).count();
    stats->events = run.events;
    stats->estimated_events = direct ? estimated_fast_events(plan) : flow_events;
    stats->flows = run.flows;
    const PlatformStats ps = platform.stats();
    stats->hosts = ps.hosts;
    stats->links = ps.links;
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    stats->peak_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;
    for (const auto& ran : run.executed)
      for (const Instr* in : ran) stats->executed.push_back(describe(*in, program, *run.rank));
  }
  return r;
}
}  // namespace

StepResult simulate_in_process(const Scenario& scenario, const StepPlan& plan, const SimOptions& options,
                               SimStats* stats) {
  return *simulate_on(scenario, plan, options, stats, true);
}

std::optional<StepResult> simulate_direct(const Scenario& scenario, const StepPlan& plan, const SimOptions& options,
                                          SimStats* stats) {
  return simulate_on(scenario, plan, options, stats, false);
}

}  // namespace dpsim
