// Host-side measure logic: statistics, iteration loop, checks, result assembly.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

#include <fmt/format.h>

#include "dpsim/backend/measure.hpp"
#include "dpsim/collective_algorithm.hpp"
#include "dpsim/error.hpp"
#include "dpsim/estimate.hpp"
#include "dpsim/hash.hpp"
#include "dpsim/sweep_spec.hpp"

#ifndef DPSIM_GIT_REVISION
#define DPSIM_GIT_REVISION "unknown"
#endif

namespace dpsim::backend {

// ---- statistics -------------------------------------------------------------------------------

double percentile(std::vector<double> values, double q) {
  if (values.empty()) throw RuntimeError("percentile of no values");
  q = std::clamp(q, 0.0, 1.0);
  std::sort(values.begin(), values.end());
  const double pos = q * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

Spread spread_of(const std::vector<double>& values) {
  Spread s;
  s.median = percentile(values, 0.5);
  s.p10 = percentile(values, 0.1);
  s.p90 = percentile(values, 0.9);
  return s;
}

void run_iterations(int warmup, int iters, const std::function<void(int, bool)>& step) {
  if (warmup < 1) throw InputError("--warmup must be >= 1: iteration 0 (DDP's one-bucket iteration) is never timed");
  if (iters < 1) throw InputError("--iters must be >= 1");
  for (int i = 0; i < warmup + iters; ++i) step(i, i >= warmup);
}

// ---- checks -----------------------------------------------------------------------------------

std::string short_gpu_name(const std::string& name) {
  static const char* models[] = {"GB200", "B200", "H200", "H100", "H800", "H20", "A100",     "A800",     "A10G",
                                 "A10",   "L40S", "L40",  "L4",   "V100", "T4",  "RTX 4090", "RTX 3090", "GB10"};
  for (const char* m : models)
    if (name.find(m) != std::string::npos) return m;
  std::string s = name;
  if (s.rfind("NVIDIA ", 0) == 0) s = s.substr(7);
  return s.empty() ? std::string("GPU") : s;
}

std::string memory_need_message(double need_bytes, const std::string& gpu_name, double free_bytes) {
  return fmt::format("needs {:.1f} GB per GPU, this {} has {:.1f} GB free", need_bytes / 1e9, short_gpu_name(gpu_name),
                     free_bytes / 1e9);
}

void check_memory(const MemoryNeed& need, const std::string& gpu_name, double free_bytes) {
  if (need.total_bytes() <= free_bytes) return;
  throw RuntimeError(
      fmt::format("{} (model state {:.1f} GB, DDP buckets {:.1f} GB, activations {:.1f} GB); use a smaller model or "
                  "micro-batch, more GPUs with sharding, or activation checkpointing",
                  memory_need_message(need.total_bytes(), gpu_name, free_bytes), need.model_state_bytes / 1e9,
                  need.ddp_buffer_bytes / 1e9, need.activation_bytes / 1e9));
}

namespace {
std::string normalize(const std::string& s) {
  std::string out;
  for (char c : s)
    if (std::isalnum(static_cast<unsigned char>(c)))
      out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}
}  // namespace

bool same_gpu_model(const std::string& scenario_name, const std::string& device_name) {
  const std::string a = short_gpu_name(scenario_name), b = short_gpu_name(device_name);
  if (normalize(a) == normalize(b)) return true;
  const std::string na = normalize(scenario_name), nb = normalize(device_name);
  return !na.empty() && (na.find(nb) != std::string::npos || nb.find(na) != std::string::npos);
}

GpuSelection select_gpus(const Scenario& scenario, int requested, const std::vector<MachineGpu>& machine) {
  GpuSelection sel;
  const int world = scenario.world_size();
  const int available = static_cast<int>(machine.size());
  if (available == 0) throw RuntimeError("no CUDA device is visible (CUDA_VISIBLE_DEVICES, driver, container?)");
  if (requested < 0) throw InputError("--gpus must be >= 1");
  if (requested == 0) {
    if (world != available)
      throw RuntimeError(fmt::format(
          "scenario '{}' needs {} GPU(s) ({} node(s) x {}), this machine has {}; pass --gpus N to run on N of them "
          "(the result records it), or use mpirun for several nodes",
          scenario.name, world, scenario.topology.nodes, scenario.topology.gpus_per_node, available));
    sel.count = world;
  } else {
    if (requested > available)
      throw RuntimeError(fmt::format("--gpus {} asks for more GPUs than this machine has ({})", requested, available));
    sel.count = requested;
    sel.overridden = requested != world;
    if (sel.overridden)
      sel.warnings.push_back(
          fmt::format("running on {} GPU(s) instead of the scenario's {}; the result records it", requested, world));
  }
  const std::string& want = scenario.topology.gpu.name.empty() ? scenario.topology.gpu.key : scenario.topology.gpu.name;
  for (int i = 0; i < sel.count; ++i) {
    if (!same_gpu_model(want, machine[i].name)) {
      const std::string msg =
          fmt::format("GPU {} is a '{}', the scenario's cluster has '{}'", i, machine[i].name, want);
      if (requested == 0) throw RuntimeError(msg + "; pass --gpus N to measure on this machine anyway");
      sel.warnings.push_back(msg);
    }
  }
  return sel;
}

Scenario scenario_on_gpus(const std::string& scenario_file, const Scenario& scenario, int gpus) {
  if (gpus == scenario.world_size()) return scenario;
  const int model = scenario.parallelism.tensor * scenario.parallelism.pipeline;
  if (gpus < 1 || gpus % model != 0)
    throw InputError(
        fmt::format("{}: --gpus {}: the scenario's tensor x pipeline degrees ({} x {}) need a multiple of "
                    "{} GPUs",
                    scenario_file, gpus, scenario.parallelism.tensor, scenario.parallelism.pipeline, model));
  try {
    return load_scenario(
        scenario_file,
        {{"cluster.nodes", "1"}, {"cluster.gpus_per_node", std::to_string(gpus)}, {"parallelism.data", "auto"}});
  } catch (const InputError& e) {
    throw InputError(fmt::format("--gpus {} (one node of {} GPUs): {}", gpus, gpus, e.what()));
  }
}

// ---- context ----------------------------------------------------------------------------------

std::string scenario_hash(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return "unknown";
  std::stringstream text;
  text << in.rdbuf();
  return fnv1a64(text.str());
}

std::string git_revision() { return DPSIM_GIT_REVISION; }

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::vector<std::pair<std::string, std::string>> nccl_environment(const Collective& c) {
  std::vector<std::pair<std::string, std::string>> env;
  if (c.algorithm != Algorithm::automatic)  // the registry's NCCL_ALGO name (core/algorithms/<name>.cpp)
    env.emplace_back("NCCL_ALGO", algorithm_descriptor(c.algorithm).nccl_algo);
  // CollNet runs only with NCCL_COLLNET_ENABLE=1 (and the SHARP plugin the platform loads)
  if (c.collnet || (c.algorithm != Algorithm::automatic && algorithm_descriptor(c.algorithm).in_network))
    env.emplace_back("NCCL_COLLNET_ENABLE", "1");
  switch (c.protocol) {
    case Protocol::automatic: break;
    case Protocol::ll: env.emplace_back("NCCL_PROTO", "LL"); break;
    case Protocol::ll128: env.emplace_back("NCCL_PROTO", "LL128"); break;
    case Protocol::simple: env.emplace_back("NCCL_PROTO", "Simple"); break;
  }
  return env;
}

std::vector<std::pair<std::string, std::string>> apply_nccl_environment(const Collective& c,
                                                                        std::vector<std::string>& notes) {
  std::vector<std::pair<std::string, std::string>> used;
  const auto pinned = nccl_environment(c);
  std::vector<std::string> names{"NCCL_ALGO", "NCCL_PROTO"};
  for (const auto& [key, v] : pinned)
    if (key == "NCCL_COLLNET_ENABLE") names.push_back(key);  // recorded where the scenario asks for CollNet
  for (const std::string& name : names) {
    const char* before = std::getenv(name.c_str());
    std::string value = before ? before : "";
    for (const auto& [key, v] : pinned) {
      if (key != name) continue;
      if (before && value != v)
        notes.push_back(
            fmt::format("{}={} from the environment replaced by the scenario's collective: {}", name, value, v));
      setenv(name.c_str(), v.c_str(), 1);
      value = v;
    }
    used.emplace_back(name, value.empty() ? "NCCL's choice" : value);
  }
  return used;
}

std::string optimizer_impl_note(const Scenario& scenario) {
  const OptimizerImpl wanted = scenario.training.optimizer_impl;
  if (wanted == kExecutorOptimizerImpl) return "";
  return fmt::format(
      "the scenario's training.optimizer_impl is {}; the backend runs the {} optimizer kernel (recorded in "
      "context.optimizer_impl; `dpsim validate` predicts {} for this result)",
      to_string(wanted), to_string(kExecutorOptimizerImpl), to_string(kExecutorOptimizerImpl));
}

nlohmann::json context_json(const MeasureContext& c) {
  nlohmann::json j;
  j["gpu_name"] = c.gpu_name;
  j["gpu_count"] = c.gpu_count;
  j["scenario_world_size"] = c.scenario_world_size;
  j["gpus_overridden"] = c.gpu_count != c.scenario_world_size;
  j["gpu_memory_bytes"] = c.gpu_memory_bytes;
  j["gpu_free_bytes_before"] = c.gpu_free_bytes;
  j["driver_version"] = c.driver_version;
  j["cuda_runtime_version"] = c.cuda_runtime_version;
  j["nccl_version"] = c.nccl_version;
  j["cublas_version"] = c.cublas_version;
  j["host"] = c.host;
  j["git_revision"] = c.git_revision;
  j["scenario_hash"] = c.scenario_hash;
  j["optimizer_impl"] = c.optimizer_impl;
  j["warmup_iterations"] = c.warmup;
  j["timed_iterations"] = c.iters;
  j["watchdog_s"] = c.watchdog_s;
  if (!c.cuda_architectures.empty()) j["cuda_architectures"] = c.cuda_architectures;
  if (!c.kernel_image.empty()) j["kernel_image"] = c.kernel_image;
  for (const auto& [key, value] : c.nccl_env) j[key] = value;
  j["tool"] = "dpsim measure";
  return j;
}

// ---- result -----------------------------------------------------------------------------------

void add_stage_spans(const std::vector<StageWork>& works, const std::vector<double>& begins_s, double end_s,
                     StepSample& sample) {
  if (works.size() != begins_s.size())
    throw RuntimeError(fmt::format("add_stage_spans: {} spans with {} begin times", works.size(), begins_s.size()));
  for (size_t i = 0; i < works.size(); ++i) {
    const double end = i + 1 < works.size() ? begins_s[i + 1] : end_s;
    if (end < begins_s[i])
      throw RuntimeError(fmt::format("add_stage_spans: span {} ({}) ends at {} s before it begins at {} s", i,
                                     to_string(works[i]), end, begins_s[i]));
    const double seconds = end - begins_s[i];
    switch (works[i]) {
      case StageWork::forward: sample.forward_s += seconds; break;
      case StageWork::backward: sample.backward_s += seconds; break;
      case StageWork::optimizer: sample.optimizer_s += seconds; break;
      case StageWork::tensor_comm: sample.tensor_comm_s += seconds; break;
      case StageWork::p2p: sample.p2p_s += seconds; break;
      case StageWork::neighbour_wait: sample.neighbour_wait_s += seconds; break;
      case StageWork::own_comm_wait: sample.exposed_comm_s += seconds; break;
    }
  }
}

namespace {

using Samples = std::vector<std::vector<StepSample>>;  // [rank][iteration]
using Slowest = std::vector<const StepSample*>;        // [iteration]: the slowest rank's sample

// Per iteration, the sample of the slowest of `ranks` (the step runs at its pace; the first of equals).
Slowest slowest_of(const Samples& samples, const std::vector<size_t>& ranks, size_t iters) {
  Slowest slowest(iters);
  for (size_t i = 0; i < iters; ++i) {
    const StepSample* s = &samples[ranks.front()][i];
    for (size_t r : ranks)
      if (samples[r][i].step_s > s->step_s) s = &samples[r][i];
    slowest[i] = s;
  }
  return slowest;
}

template <class Get>
std::vector<double> collect(const Slowest& slowest, Get get) {
  std::vector<double> v;
  v.reserve(slowest.size());
  for (const StepSample* s : slowest) v.push_back(get(*s));
  return v;
}

// The median of `values`, recorded with its spread under `key`.
double record_spread(const char* key, const std::vector<double>& values, StepResult& result) {
  const Spread s = spread_of(values);
  result.spreads[key] = {{"median", s.median}, {"p10", s.p10}, {"p90", s.p90}};
  return s.median;
}

double step_of(const StepSample& s) { return s.step_s; }
double forward_of(const StepSample& s) { return s.forward_s; }
double backward_of(const StepSample& s) { return s.backward_s; }
double optimizer_of(const StepSample& s) { return s.optimizer_s; }
double tensor_comm_of(const StepSample& s) { return s.tensor_comm_s; }
double p2p_of(const StepSample& s) { return s.p2p_s; }
double stage_exposed_of(const StepSample& s) { return s.exposed_comm_s; }
// Without stages: the compute waiting for the network, what the step leaves beside forward, backward and optimizer.
double exposed_of(const StepSample& s) { return std::max(0.0, s.step_s - s.forward_s - s.backward_s - s.optimizer_s); }
// A stage's bubble: what its step leaves beside compute, tensor, p2p and its exposed communication (waiting for a
// neighbour, StageWork::neighbour_wait, and anything no span covers).
double bubble_of(const StepSample& s) {
  return std::max(0.0,
                  s.step_s - s.forward_s - s.backward_s - s.optimizer_s - s.tensor_comm_s - s.p2p_s - s.exposed_comm_s);
}
// The comm stream's collectives (a stage's rank times its own buckets only; the others are 0).
double comm_busy_of(const StepSample& s) {
  double t = 0;
  for (const auto& b : s.buckets) t += b.end_s - b.start_s;
  return t;
}

// Without pipeline stages: step.* from the slowest rank of each iteration.
void step_figures(const Slowest& slowest, StepResult& result) {
  result.step_time_s = record_spread("step.time_s", collect(slowest, step_of), result);
  result.forward_s = record_spread("step.forward_s", collect(slowest, forward_of), result);
  result.backward_s = record_spread("step.backward_s", collect(slowest, backward_of), result);
  result.optimizer_s = record_spread("step.optimizer_s", collect(slowest, optimizer_of), result);
  result.exposed_comm_s = record_spread("step.exposed_comm_s", collect(slowest, exposed_of), result);
  result.comm_busy_s = record_spread("comm_busy_s", collect(slowest, comm_busy_of), result);
  result.no_overlap_step_s = result.forward_s + result.backward_s + result.optimizer_s + result.comm_busy_s;
}

// Each rank's pipeline stage, checked: the same in every iteration, within the plan's stages, every stage run.
std::vector<std::vector<size_t>> ranks_by_stage(const StepPlan& plan, const Samples& samples) {
  std::vector<std::vector<size_t>> ranks(static_cast<size_t>(plan.pipeline.stages));
  for (size_t r = 0; r < samples.size(); ++r) {
    const int stage = samples[r].front().stage;
    for (const StepSample& s : samples[r])
      if (s.stage != stage || stage < 0 || stage >= plan.pipeline.stages)
        throw RuntimeError(
            fmt::format("assemble_result: rank {} has a sample of stage {} (first {}) in a pipeline of {}", r, s.stage,
                        stage, plan.pipeline.stages));
    ranks[static_cast<size_t>(stage)].push_back(r);
  }
  for (size_t k = 0; k < ranks.size(); ++k)
    if (ranks[k].empty()) throw RuntimeError(fmt::format("assemble_result: no rank ran pipeline stage {}", k));
  return ranks;
}

// A stage's figures: the medians of its slowest rank's (StageTiming as predict fills it).
StageTiming stage_timing(int stage, const Slowest& slowest) {
  StageTiming t;
  t.stage = stage;
  t.forward_s = percentile(collect(slowest, forward_of), 0.5);
  t.backward_s = percentile(collect(slowest, backward_of), 0.5);
  t.optimizer_s = percentile(collect(slowest, optimizer_of), 0.5);
  t.tensor_comm_s = percentile(collect(slowest, tensor_comm_of), 0.5);
  t.p2p_s = percentile(collect(slowest, p2p_of), 0.5);
  t.exposed_comm_s = percentile(collect(slowest, stage_exposed_of), 0.5);
  t.comm_busy_s = percentile(collect(slowest, comm_busy_of), 0.5);
  t.bubble_s = percentile(collect(slowest, bubble_of), 0.5);
  t.end_s = percentile(collect(slowest, step_of), 0.5);
  return t;
}

// Pipeline stages: stages[] per stage, the step the slowest rank's, step.* the stage with the most compute
// (report_stages, as predict reports it), with its spreads. Returns each stage's slowest rank per iteration.
std::vector<Slowest> stage_figures(const StepPlan& plan, const Samples& samples, const Slowest& slowest,
                                   StepResult& result) {
  const size_t iters = slowest.size();
  std::vector<Slowest> of_stage;
  for (const std::vector<size_t>& ranks : ranks_by_stage(plan, samples)) {
    of_stage.push_back(slowest_of(samples, ranks, iters));
    result.stages.push_back(stage_timing(static_cast<int>(of_stage.size() - 1), of_stage.back()));
  }
  result.step_time_s = record_spread("step.time_s", collect(slowest, step_of), result);
  report_stages(plan, result);
  const Slowest& reported = of_stage.at(static_cast<size_t>(result.reported_stage));
  record_spread("step.forward_s", collect(reported, forward_of), result);
  record_spread("step.backward_s", collect(reported, backward_of), result);
  record_spread("step.optimizer_s", collect(reported, optimizer_of), result);
  record_spread("step.tensor_comm_s", collect(reported, tensor_comm_of), result);
  record_spread("step.p2p_s", collect(reported, p2p_of), result);
  record_spread("step.exposed_comm_s", collect(reported, stage_exposed_of), result);
  record_spread("comm_busy_s", collect(reported, comm_busy_of), result);
  return of_stage;
}

// Bucket b's ready/start/end: medians over `slowest` (its stage's ranks' with pipeline stages).
BucketTiming bucket_timing(const StepPlan& plan, size_t b, const Slowest& slowest) {
  BucketTiming t;
  t.index = static_cast<int>(b);
  t.bytes = plan.buckets[b].bytes;
  std::vector<double> ready, start, end;
  for (const StepSample* s : slowest) {
    if (s->buckets.size() != plan.buckets.size())
      throw RuntimeError("assemble_result: a sample has the wrong number of buckets");
    ready.push_back(s->buckets[b].ready_s);
    start.push_back(s->buckets[b].start_s);
    end.push_back(s->buckets[b].end_s);
  }
  t.ready_s = percentile(ready, 0.5);
  t.start_s = percentile(start, 0.5);
  t.end_s = percentile(end, 0.5);
  t.algorithm = "nccl";
  return t;
}

}  // namespace

StepResult assemble_result(const Scenario& scenario, const StepPlan& plan, const MeasureContext& context,
                           const std::vector<std::vector<StepSample>>& samples) {
  if (samples.empty() || samples.front().empty()) throw RuntimeError("assemble_result: no timed iterations");
  const size_t iters = samples.front().size();
  for (const auto& r : samples)
    if (r.size() != iters) throw RuntimeError("assemble_result: ranks have different iteration counts");
  const bool staged = plan.pipeline.stages > 1;
  for (const auto& r : samples)
    for (const StepSample& s : r)
      if (!staged && s.stage >= 0)
        throw RuntimeError(
            fmt::format("assemble_result: a sample of pipeline stage {} in a step without stages", s.stage));

  StepResult result;
  result.scenario = scenario.name;
  result.mode = "measure";
  fill_common(scenario, plan, result);
  result.context = context_json(context);
  if (context.gpu_memory_bytes > 0) result.gpu_memory_bytes = context.gpu_memory_bytes;

  // Per iteration, the step of the slowest rank (DDP runs at its pace; a pipeline step ends with its last rank).
  std::vector<size_t> all(samples.size());
  for (size_t r = 0; r < all.size(); ++r) all[r] = r;
  const Slowest slowest = slowest_of(samples, all, iters);
  std::vector<Slowest> of_stage;
  if (staged)
    of_stage = stage_figures(plan, samples, slowest, result);
  else
    step_figures(slowest, result);

  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const BucketTiming t =
        bucket_timing(plan, b, staged ? of_stage.at(static_cast<size_t>(plan.buckets[b].stage)) : slowest);
    result.buckets.push_back(t);
    result.timeline.push_back({0, "comm", fmt::format("allreduce bucket {}", b), t.start_s, t.end_s});
  }

  if (context.single_allreduce_s > 0) {  // measured: a GPU's gradients as one message over its data-parallel group
    result.nccl_time_s = context.single_allreduce_s;
    const int n = plan.dims.data;
    result.nccl_busbw_GBps =
        static_cast<double>(plan.gradient_bytes) / context.single_allreduce_s / 1e9 * 2.0 * (n - 1) / std::max(1, n);
    result.nccl_algorithm = "measured";
    result.nccl_protocol.clear();
  }

  // Each data-parallel replica (tensor x pipeline of the GPUs) trains its micro-batches.
  const int replicas = context.gpu_count / (plan.dims.tensor * plan.dims.pipeline);
  const double samples_per_step =
      static_cast<double>(plan.micro_batch * plan.gradient_accumulation) * static_cast<double>(replicas);
  if (result.step_time_s > 0) {
    result.samples_per_s = samples_per_step / result.step_time_s;
    result.tokens_per_s = result.samples_per_s * static_cast<double>(plan.sequence_length);
    const double compute = result.forward_s + result.backward_s + result.optimizer_s;
    result.scaling_efficiency = compute / result.step_time_s;  // measured: no-communication step / step
  }
  if (context.gpu_count != context.scenario_world_size)
    result.advice.push_back(fmt::format("measured on {} GPU(s); the scenario's cluster has {}", context.gpu_count,
                                        context.scenario_world_size));
  return result;
}

}  // namespace dpsim::backend
