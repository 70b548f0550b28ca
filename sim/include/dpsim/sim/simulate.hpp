#pragma once
// The simulator: one training step of a StepPlan on a platform built from the scenario's topology. A step whose
// calls lay no flows runs on the direct engine in this process; one that lays flows runs on SimGrid's engine in a
// child process (SimGrid has one engine per process, loaded from its plugin there), so simulate() can be called any
// number of times from one program.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dpsim/plan.hpp"
#include "dpsim/program.hpp"
#include "dpsim/result.hpp"
#include "dpsim/scenario.hpp"

namespace dpsim {

enum class Fidelity {
  fast,
  step
};  // fast: bucket-granularity flows (default); step: every NCCL step of every call as messages
const char* to_string(Fidelity fidelity);
Fidelity parse_fidelity(const std::string& text);  // "fast" | "step"; throws InputError

struct SimOptions {
  Fidelity fidelity = Fidelity::fast;
  bool overlap = true;      // false: every all-reduce waits for the end of backward
  int trace_ranks = 8;      // GPUs kept in the timeline's sample (see trace.hpp)
  bool progress = true;     // progress line on stderr once a run takes more than a second
  double max_events = 5e6;  // refuse (with the estimate) a run that would simulate more activities (no GPU cap)
  double max_memory_bytes = 8.0 * 1024 * 1024 * 1024;  // ... or hold more memory (estimated_memory_bytes)
  bool record_program = false;  // tests: SimStats::executed lists every instruction each stream's actor ran
  // false: the result's timeline stays empty (runs that read only the step's figures: predict's advice variants,
  // validate, sweep points); the run records none and the simulating child sends none back, the larger part of what
  // it returned.
  bool timeline = true;
  // false: SimGrid's engine runs the step even where the direct engine would (sim/src/direct.hpp: fast fidelity
  // where no call lays flows); tests compare the two.
  bool direct_engine = true;
  // Tests: run this program (its dims, streams and calls) instead of make_step_program(plan); it must be a program
  // of `plan` (its ops, buckets and units).
  const StepProgram* program = nullptr;
};

// What the run cost (never part of the result: results must be byte-for-byte deterministic).
struct SimStats {
  double wall_s = 0;                  // whole call, fork and platform build included
  double simulate_wall_s = 0;         // the engine's run only
  int64_t events = 0;                 // simulated activities: compute ops, flows, sleeps (the first rank class's)
  double estimated_events = 0;        // what the run was estimated to simulate before it started (every class)
  int64_t flows = 0;                  // point-to-point transfers handed to SimGrid
  int64_t hosts = 0;                  // hosts in the platform
  int64_t links = 0;                  // links in the platform (one per direction)
  int64_t peak_rss_bytes = 0;         // of the process that ran the step (this one on the direct engine)
  std::vector<std::string> executed;  // SimOptions::record_program: describe() of each instruction run, per stream
                                      // in the order its actor ran them, streams one after the other
};

StepResult simulate(const Scenario& scenario, const StepPlan& plan, const SimOptions& options);

// Activities (compute ops, flows, sleeps) a fast-fidelity run simulates, estimated before it starts: its ops and a
// handful per bucket. A run whose calls lay flows counts, once its platform exists and before the engine runs, every
// flow they lay (step fidelity: every call's NCCL steps x the flows of a step, for the algorithm the cost model picks
// for the call, on the call's groups; fast fidelity: the whole pattern of each call that is not probed), and is
// refused above options.max_events with that count (SimStats::estimated_events).
double estimated_fast_events(const StepPlan& plan);
// The memory the simulation process holds for `plan`'s world on the full or the reduced platform, on the direct
// engine or on SimGrid's (a run above options.max_memory_bytes is refused with this estimate: with the direct
// engine's before anything is built, with SimGrid's once the step is known to need it).
double estimated_memory_bytes(const StepPlan& plan, bool reduced_platform, bool simgrid_engine);
StepResult simulate(const Scenario& scenario, const StepPlan& plan, const SimOptions& options, SimStats* stats);

// The same, in this process, without forking: SimGrid can run only once per process, so this is
// for a child process or a one-shot tool. simulate() calls it in its child.
StepResult simulate_in_process(const Scenario& scenario, const StepPlan& plan, const SimOptions& options,
                               SimStats* stats);
// The step in this process where the direct engine runs it; nothing (and no run) where it needs SimGrid's engine.
std::optional<StepResult> simulate_direct(const Scenario& scenario, const StepPlan& plan, const SimOptions& options,
                                          SimStats* stats);

}  // namespace dpsim
