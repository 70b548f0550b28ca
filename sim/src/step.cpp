// One training step on SimGrid: a compute actor (forward, backward in plan order, optimizer) and a
// communication actor (one FIFO stream of bucket all-reduces), handing buckets over with a
// semaphore. All ranks run the same plan on a symmetric platform, so one pair of actors drives the
// step (driver pattern); the collectives' flows use Comm::sendto_async and need no actor per rank.
#include <xbt/log.h>
#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Semaphore.hpp>

#include <fmt/format.h>
#include <sys/resource.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>

#include "collective.hpp"
#include "dpsim/cost.hpp"
#include "dpsim/error.hpp"
#include "dpsim/estimate.hpp"
#include "dpsim/sim/simulate.hpp"
#include "dpsim/training_cost.hpp"
#include "dpsim/units.hpp"
#include "platform.hpp"

namespace sg4 = simgrid::s4u;

namespace dpsim {

namespace sim {
namespace {

constexpr double kOpsPerSecond = 1e9;    // compute host speed: one op is a nanosecond of GPU time
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

struct BucketRun {
  CollectiveCost cost;
  const CollectiveAlgorithm* algorithm = nullptr;
  double wire_factor = 1;  // wire bytes per payload byte: 1 / protocol efficiency
  double ready = -1, start = 0, end = 0;
};

struct Run {
  const Scenario* scenario = nullptr;
  const StepPlan* plan = nullptr;
  SimOptions options;
  Platform* platform = nullptr;
  ComputeModel cm;
  std::vector<BucketRun> buckets;
  std::map<Algorithm, double> seconds_per_byte;  // fast fidelity: platform time per wire byte
  std::vector<std::vector<int>> ready_at;        // backward position -> buckets
  sg4::SemaphorePtr bucket_ready = sg4::Semaphore::create(0);
  sg4::SemaphorePtr comm_done = sg4::Semaphore::create(0);
  bool backward_done = false;
  double t0 = 0, forward_end = 0, backward_end = 0, comm_end = 0, optimizer_start = 0, step_end = 0;
  double accumulation_s = 0, forward_sum = 0, backward_sum = 0;
  std::vector<TimelineEvent> timeline;
  int64_t events = 0, flows = 0;
  Progress progress{false};

  double now() const { return sg4::Engine::get_clock() - t0; }

  void compute(const std::string& name, double seconds) {
    const double start = now();
    if (seconds > 0) sg4::this_actor::execute(seconds * kOpsPerSecond);
    ++events;
    timeline.push_back({0, "compute", name, start, now()});
  }

  // Starts `pattern` (flows for one payload byte) scaled to `bytes` and waits for all of them.
  void run_flows(const std::vector<Flow>& pattern, double bytes) {
    std::vector<sg4::CommPtr> comms;
    comms.reserve(pattern.size());
    for (const Flow& f : pattern) {
      const auto size = static_cast<uint64_t>(std::llround(f.bytes * bytes));
      if (size == 0 || f.src == f.dst) continue;
      comms.push_back(sg4::Comm::sendto_async(platform->host(f.src), platform->host(f.dst), size));
    }
    flows += static_cast<int64_t>(comms.size());
    events += static_cast<int64_t>(comms.size());
    sg4::Comm::wait_all(comms);
  }

  std::vector<Flow> pattern(const BucketRun& b, bool per_step, double wire_factor) const {
    auto flows_ = per_step ? b.algorithm->step_flows(*platform, 1.0) : b.algorithm->flows(*platform, 1.0);
    for (Flow& f : flows_) f.bytes *= wire_factor;
    return flows_;
  }

  // Fast fidelity: the platform time of each algorithm's flow pattern, simulated once on the whole
  // flow set. Collectives are serialized on one stream, so a bucket's flows have the network to
  // themselves, and the fluid model's time scales exactly with the bytes (and with the protocol's
  // wire bytes).
  void probe_patterns() {
    for (const BucketRun& b : buckets) {
      const auto key = b.cost.algorithm;
      if (seconds_per_byte.count(key)) continue;
      const double start = sg4::Engine::get_clock();
      run_flows(pattern(b, false, 1.0), kProbeBytes);
      seconds_per_byte[key] = (sg4::Engine::get_clock() - start) / kProbeBytes;
    }
  }

  void collective(size_t index) {
    BucketRun& b = buckets[index];
    const auto bytes = static_cast<double>(plan->buckets[index].bytes);
    // NCCL's model time = latency + pipeline fill + bandwidth term; links bound only the bandwidth term.
    const double fill_s = b.cost.fill_s;
    const double model_bw_s = std::max(0.0, b.cost.time_s - b.cost.latency_s - fill_s);
    const double launch_s = scenario->nccl.framework_launch_overhead_s;  // PyTorch's launch of this bucket
    if (options.fidelity == Fidelity::fast) {
      const double platform_s = seconds_per_byte.at(b.cost.algorithm) * bytes * b.wire_factor;
      sg4::this_actor::sleep_for(launch_s + b.cost.latency_s + fill_s + std::max(model_bw_s, platform_s));
      ++events;
      return;
    }
    // Step fidelity: NCCL's steps as synchronized rounds of messages, each after its share of the latency.
    const int steps = b.algorithm->steps(*platform);
    const std::vector<Flow> round = pattern(b, true, b.wire_factor);
    if (launch_s + fill_s > 0) sg4::this_actor::sleep_for(launch_s + fill_s);
    const double start = sg4::Engine::get_clock();
    double latency_paid = 0;
    for (int s = 0; s < steps; ++s) {
      const double lat = b.cost.latency_s / steps;
      sg4::this_actor::sleep_for(lat);
      latency_paid += lat;
      run_flows(round, bytes);
    }
    const double platform_s = sg4::Engine::get_clock() - start - latency_paid;
    if (model_bw_s > platform_s) sg4::this_actor::sleep_for(model_bw_s - platform_s);
  }

  void compute_actor() {
    const auto k = plan->gradient_accumulation;
    if (k > 1)
      compute(fmt::format("{} micro-steps without sync", k - 1),
              static_cast<double>(k - 1) * (forward_sum + backward_sum));
    const double fwd_start = now();
    for (const PlanOp& op : plan->ops) compute("fwd " + op.name, forward_seconds(op, cm));
    forward_end = now();
    accumulation_s = fwd_start;
    for (size_t pos = 0; pos < plan->backward_order.size(); ++pos) {
      const PlanOp& op = plan->ops[static_cast<size_t>(plan->backward_order[pos])];
      compute("bwd " + op.name, backward_seconds(op, cm));
      for (int b : ready_at[pos]) {
        buckets[static_cast<size_t>(b)].ready = now();
        bucket_ready->release();
      }
      progress.tick("backward op", pos + 1, plan->backward_order.size());
    }
    backward_end = now();
    backward_done = true;
    bucket_ready->release();
    comm_done->acquire();
    optimizer_start = now();
    compute("optimizer", memory_seconds(plan->optimizer.bytes + plan->final_copy_bytes, cm));
    step_end = now();
  }

  void comm_actor() {
    sg4::Host* cpu = platform->compute_host();
    const bool communicate = plan->world_size > 1;
    for (size_t i = 0; i < buckets.size(); ++i) {
      BucketRun& b = buckets[i];
      while (b.ready < 0 || (!options.overlap && !backward_done)) bucket_ready->acquire();
      b.start = now();
      if (communicate) {
        if (!backward_done) cpu->set_pstate(1);  // the collective slows the backward beside it
        collective(i);
        cpu->set_pstate(0);
      }
      b.end = now();
      const auto& pb = plan->buckets[i];
      timeline.push_back({0, "comm",
                          fmt::format("all-reduce b{} {} {}/{}", pb.index, format_bytes(static_cast<double>(pb.bytes)),
                                      to_string(b.cost.algorithm), to_string(b.cost.protocol)),
                          b.start, b.end});
      progress.tick("bucket", i + 1, buckets.size());
    }
    comm_end = buckets.empty() ? now() : buckets.back().end;
    comm_done->release();
  }
};

void configure_engine() {
  // Exact alpha-beta sharing (see docs/simulator.md): CM02 without cross-traffic and without the
  // TCP window cap. Must be set before the platform exists.
  sg4::Engine::set_config("network/model:CM02");
  sg4::Engine::set_config("network/crosstraffic:0");
  sg4::Engine::set_config("network/TCP-gamma:0");
  sg4::Engine::set_config("contexts/stack-size:256");
}

}  // namespace
}  // namespace sim

const char* to_string(Fidelity fidelity) { return fidelity == Fidelity::fast ? "fast" : "step"; }

Fidelity parse_fidelity(const std::string& text) {
  if (text == "fast") return Fidelity::fast;
  if (text == "step") return Fidelity::step;
  throw InputError(fmt::format("--fidelity: expected fast or step, got \"{}\"", text));
}

double estimated_events(const StepPlan& plan, Fidelity fidelity) {
  const double n = plan.world_size;
  const double ops = 2.0 * static_cast<double>(plan.ops.size()) + 1;
  const double buckets = static_cast<double>(plan.buckets.size());
  if (fidelity == Fidelity::step) return ops + buckets * 2.0 * (n - 1) * n;
  return ops + 4.0 * buckets;
}

StepResult simulate_in_process(const Scenario& scenario, const StepPlan& plan, const SimOptions& options,
                               SimStats* stats) {
  using namespace sim;
  const auto wall_start = Clock::now();
  const double events = estimated_events(plan, options.fidelity);
  if (events > options.max_events)
    throw InputError(fmt::format(
        "{} fidelity would simulate about {:.3g} events for {} GPUs and {} buckets, above the limit of {:.3g} "
        "(raise it with --max-events, or use --fidelity fast)",
        to_string(options.fidelity), events, plan.world_size, plan.buckets.size(), options.max_events));
  if (options.fidelity == Fidelity::step && plan.world_size > 256)
    throw InputError(fmt::format(
        "--fidelity step simulates every ring step as messages; {} GPUs is too many (at most 256)", plan.world_size));

  // The engine: logs silenced, exact network settings, raw contexts (threads are 12-16x slower).
  int argc = 3;
  char arg0[] = "dpsim";
  char arg1[] = "--log=root.thres:critical";
  char arg2[] = "--cfg=contexts/factory:raw";
  char* argv[] = {arg0, arg1, arg2, nullptr};
  sg4::Engine engine(&argc, argv);
  configure_engine();

  Platform platform(scenario, options.fidelity == Fidelity::fast);

  Run run;
  run.scenario = &scenario;
  run.plan = &plan;
  run.options = options;
  run.platform = &platform;
  run.cm = compute_model(scenario);
  run.progress = Progress(options.progress);
  for (const PlanOp& op : plan.ops) {
    run.forward_sum += forward_seconds(op, run.cm);
    run.backward_sum += backward_seconds(op, run.cm);
  }
  const FabricSummary fabric = summarize_fabric(scenario.topology);
  run.ready_at.resize(plan.backward_order.size());
  for (const Bucket& b : plan.buckets) {
    BucketRun br;
    if (plan.world_size > 1) {
      br.cost = allreduce_cost(static_cast<double>(b.bytes), fabric, scenario.nccl, scenario.collective);
      br.algorithm = &collective_algorithm(br.cost.algorithm);
      if (!br.algorithm->available(platform))
        throw InputError(fmt::format("collective: {} is not available on topology {}", to_string(br.cost.algorithm),
                                     scenario.topology.name));
      const double eff = scenario.nccl.protocol_efficiency.get(br.cost.protocol);
      if (!(eff > 0)) throw InputError(fmt::format("protocol_efficiency.{}: must be > 0", to_string(br.cost.protocol)));
      br.wire_factor = 1.0 / eff;
    }
    run.buckets.push_back(br);
    const int pos = b.ready_after_backward_op;
    if (pos < 0 || static_cast<size_t>(pos) >= run.ready_at.size())
      throw RuntimeError(
          fmt::format("plan: bucket {} is ready after backward position {}, outside the backward", b.index, pos));
    run.ready_at[static_cast<size_t>(pos)].push_back(b.index);
  }

  sg4::Actor::create("step", platform.compute_host(), [&run] {
    if (run.options.fidelity == Fidelity::fast && run.plan->world_size > 1) run.probe_patterns();
    run.t0 = sg4::Engine::get_clock();
    sg4::Actor::create("comm", run.platform->compute_host(), [&run] { run.comm_actor(); });
    run.compute_actor();
  });
  const auto sim_start = Clock::now();
  engine.run();
  const double sim_wall = std::chrono::duration<double>(Clock::now() - sim_start).count();

  // The result.
  StepResult r;
  r.mode = "predict";
  fill_common(scenario, plan, r);
  const auto k = static_cast<double>(plan.gradient_accumulation);
  const double micro = run.forward_sum + run.backward_sum;
  r.forward_s = (k - 1) * run.forward_sum + (run.forward_end - run.accumulation_s);
  r.backward_s = (k - 1) * run.backward_sum + (run.backward_end - run.forward_end);
  r.exposed_comm_s = std::max(0.0, run.comm_end - run.backward_end);
  r.optimizer_s = run.step_end - run.optimizer_start;
  r.step_time_s = run.step_end;
  for (size_t i = 0; i < plan.buckets.size(); ++i) {
    const BucketRun& b = run.buckets[i];
    r.comm_busy_s += b.end - b.start;
    r.buckets.push_back({plan.buckets[i].index, static_cast<long long>(plan.buckets[i].bytes), b.ready, b.start, b.end,
                         plan.world_size > 1 ? to_string(b.cost.algorithm) : "none",
                         plan.world_size > 1 ? to_string(b.cost.protocol) : "none"});
  }
  const double single_gpu_s = k * micro + memory_seconds(plan.optimizer.bytes + plan.final_copy_bytes, run.cm);
  r.no_overlap_step_s = single_gpu_s + r.comm_busy_s;
  const double samples = static_cast<double>(plan.world_size * plan.micro_batch * plan.gradient_accumulation);
  r.samples_per_s = r.step_time_s > 0 ? samples / r.step_time_s : 0;
  r.tokens_per_s = r.samples_per_s * static_cast<double>(plan.sequence_length);
  r.scaling_efficiency = r.step_time_s > 0 ? single_gpu_s / r.step_time_s : 0;
  fill_training_cost(scenario, r);
  r.timeline = std::move(run.timeline);
  r.context["simulator"] = {{"engine", "SimGrid 3.32"},
                            {"network_model", "CM02, crosstraffic 0, TCP-gamma 0"},
                            {"fidelity", to_string(options.fidelity)},
                            {"overlap", options.overlap},
                            {"overlap_slowdown", scenario.nccl.overlap_slowdown}};

  if (stats) {
    stats->simulate_wall_s = sim_wall;
    stats->wall_s = std::chrono::duration<double>(Clock::now() - wall_start).count();
    stats->events = run.events;
    stats->flows = run.flows;
    const PlatformStats ps = platform.stats();
    stats->hosts = ps.hosts;
    stats->links = ps.links;
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    stats->peak_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;
  }
  return r;
}

}  // namespace dpsim
