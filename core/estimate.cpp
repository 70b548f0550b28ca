#include "dpsim/estimate.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "dpsim/analytic.hpp"
#include "dpsim/compute_cost.hpp"
#include "dpsim/cost.hpp"
#include "dpsim/program.hpp"
#include "dpsim/sharding.hpp"
#include "dpsim/training_cost.hpp"

namespace dpsim {

namespace {

// The process groups rank 0 communicates over that hold more than one rank: one NCCL communicator each
// (ProcessGroupNCCL creates a group's communicator at its first collective).
int communicators_per_rank(const StepProgram& p) {
  std::set<GroupKind> kinds;
  for (const CommCall& c : p.classes.front().comms)
    if (group_size(c.group, p.dims) > 1) kinds.insert(c.group);
  return static_cast<int>(kinds.size());
}

}  // namespace

void fill_common(const Scenario& s, const StepPlan& plan, StepResult& r) {
  fill_common(s, plan, make_step_program(plan), r);
}

void fill_common(const Scenario& s, const StepPlan& plan, const StepProgram& program, StepResult& r) {
  r.scenario = s.name;
  r.parameters = plan.model_parameters;
  r.parameters_per_gpu = plan.parameters;
  r.gradient_bytes = plan.gradient_bytes;
  if (s.training.trainable != Trainable::all) {
    r.trainable = to_string(s.training.trainable);
    r.trainable_parameters = plan.trainable_parameters;
  }
  r.model_state_bytes_per_gpu = plan.memory.model_state_bytes;
  r.activation_bytes_per_gpu = plan.memory.activation_bytes;
  r.ddp_buffer_bytes_per_gpu = plan.memory.ddp_buffer_bytes;
  r.unsharded_bytes_per_gpu = plan.memory.unsharded_bytes;
  r.weight_copy_bytes_per_gpu = plan.memory.weight_copy_bytes;
  r.data_parallel = plan.dims.data;
  r.tensor_parallel = plan.dims.tensor;
  r.context_parallel = plan.dims.context;
  r.pipeline_parallel = plan.pipeline.stages;
  r.pipeline_schedule = plan.pipeline.stages > 1 ? to_string(plan.pipeline.schedule) : "";
  r.virtual_stages = plan.pipeline.virtual_stages;
  r.sequence_parallel = s.parallelism.sequence_parallel;
  r.tp_comm_overlap = to_string(s.parallelism.tp_comm_overlap);
  r.tensor_impl = to_string(s.parallelism.tensor_impl);
  const ComputeModel cm = compute_model(s);
  r.peak_flops_per_s = cm.peak_flops_per_s;
  r.hardware_flops_per_step_per_gpu = 0;
  for (const PlanOp& op : plan.ops) r.hardware_flops_per_step_per_gpu += executed_flops(op, cm);
  // Each GPU runs its stage's ops: 1/stages of them on average.
  r.hardware_flops_per_step_per_gpu *=
      static_cast<double>(std::max<int64_t>(1, plan.gradient_accumulation)) / plan.pipeline.stages;
  r.sharding = to_string(plan.sharded.sharding);
  r.shard_group = plan.sharded.replicas > 1 ? plan.sharded.shards : 0;
  r.gpu_memory_bytes = s.topology.gpu.memory_bytes;
  r.cuda_context_bytes_per_gpu = s.topology.gpu.cuda_context_bytes;
  r.cublas_workspace_bytes_per_gpu = s.topology.gpu.cublas_workspace_bytes;
  r.nccl_communicators = communicators_per_rank(program);
  r.nccl_bytes_per_gpu = r.nccl_communicators * s.nccl.communicator_bytes;
  r.fits = r.memory_need_bytes() <= r.gpu_memory_bytes;

  // One all-reduce of a GPU's gradients over its data-parallel group (the whole cluster without model parallelism;
  // data x context GPUs with context parallelism).
  const FabricSummary fabric = group_fabric(s, program, GroupKind::data);
  const auto bytes = static_cast<double>(plan.gradient_bytes);
  const int replicas = group_size(GroupKind::data, plan.dims);
  r.allreduce_bytes_sent_per_gpu = ring_bytes_sent_per_gpu(bytes, replicas);
  r.allreduce_algorithm = "ring";
  if (replicas > 1) {
    const double bw = fabric.ring_bytes_per_s();
    r.allreduce_time_s = ideal_ring_allreduce_seconds(bytes, replicas, bw);
    r.allreduce_busbw_GBps = bw / 1e9;
    const CollectiveCost nccl = allreduce_cost(bytes, fabric, s.nccl, s.collective);
    r.nccl_time_s = nccl.time_s;
    r.nccl_busbw_GBps = nccl.busbw_bytes_per_s / 1e9;
    r.nccl_algorithm = to_string(nccl.algorithm);
    r.nccl_protocol = to_string(nccl.protocol);
  }
  r.context["world_size"] = plan.world_size;
  r.context["nodes"] = s.topology.nodes;
  r.context["gpus_per_node"] = s.topology.gpus_per_node;
  r.context["gpu"] = s.topology.gpu.name;
  r.context["topology"] = s.topology.name;
  r.context["model"] = s.model.name;
  r.context["micro_batch"] = plan.micro_batch;
  r.context["sequence_length"] = plan.sequence_length;
  r.context["gradient_accumulation"] = plan.gradient_accumulation;
  r.context["nccl_model_version"] = s.nccl.version;
}

namespace {

StepBound bound(const StepPlan& plan, double single_gpu_step_s, double step_s, double exposed_s) {
  const auto samples = static_cast<double>(plan.samples_per_step);
  return {step_s, exposed_s, step_s > 0 ? samples / step_s : 0, step_s > 0 ? single_gpu_step_s / step_s : 0};
}

}  // namespace

void fill_throughput(const StepPlan& plan, StepResult& r) {
  const auto samples = static_cast<double>(plan.samples_per_step);
  const bool ran = r.step_time_s > 0;
  r.samples_per_s = ran ? samples / r.step_time_s : 0;
  r.tokens_per_s = r.samples_per_s * static_cast<double>(plan.sequence_length);
  r.model_flops_per_s_per_gpu = r.samples_per_s * plan.model_flops_per_sample / plan.world_size;
  r.mfu = r.peak_flops_per_s > 0 ? r.model_flops_per_s_per_gpu / r.peak_flops_per_s : 0;
  r.hardware_flops_per_s_per_gpu = ran ? r.hardware_flops_per_step_per_gpu / r.step_time_s : 0;
  r.hfu = r.peak_flops_per_s > 0 ? r.hardware_flops_per_s_per_gpu / r.peak_flops_per_s : 0;
}

void report_stages(const StepPlan& plan, StepResult& r) {
  if (r.stages.empty()) return;
  size_t most = 0;  // the stage with the most compute: what step.* describes
  for (size_t k = 0; k < r.stages.size(); ++k) {
    const StageTiming& t = r.stages[k];
    if (t.forward_s + t.backward_s > r.stages[most].forward_s + r.stages[most].backward_s) most = k;
    r.step_time_s = std::max(r.step_time_s, t.end_s);
    r.stages[k].memory_need_bytes = plan.pipeline.stage.at(k).memory.total_bytes() + r.runtime_bytes_per_gpu();
  }
  const StageTiming& t = r.stages[most];
  r.reported_stage = t.stage;
  r.forward_s = t.forward_s;
  r.backward_s = t.backward_s;
  r.optimizer_s = t.optimizer_s;
  r.tensor_comm_s = t.tensor_comm_s;
  r.context_comm_s = t.context_comm_s;
  r.p2p_s = t.p2p_s;
  r.exposed_comm_s = t.exposed_comm_s;
  r.comm_busy_s = t.comm_busy_s;
  r.pipeline_bubble_s = t.bubble_s + (r.step_time_s - t.end_s);  // it also waits for the last stage to finish
  // Without overlap the stage's hidden reductions would run after its backward.
  r.no_overlap_step_s = r.step_time_s + std::max(0.0, t.comm_busy_s - t.exposed_comm_s);
}

namespace {

// The calls `run` ran into comm[].
void append_comm(const AnalyticExecutor& run, const RankProgram& rank, const StepProgram& program, StepResult& r) {
  for (size_t i = 0; i < run.calls().size(); ++i) {
    const CallTiming& t = run.calls()[i];
    r.comm.push_back(comm_timing(rank.comms[i], program.streams[static_cast<size_t>(t.stream)], t.ready_s, t.start_s,
                                 t.end_s, t.moves ? &t.cost : nullptr));
  }
}

// Pipeline stages: every stage's class through its own closed-form executor, walked together (the stages wait for
// each other's sends); step.* describes the stage with the most compute, stages[] every stage.
Estimate estimate_pipeline(const Scenario& s, const StepPlan& plan, const StepProgram& program, Estimate e) {
  StepResult& r = e.result;
  EventTimes crossed;
  std::vector<AnalyticExecutor> runs;
  runs.reserve(program.classes.size());
  for (size_t c = 0; c < program.classes.size(); ++c)
    runs.emplace_back(s, plan, program, c, &crossed, c == 0);  // comm[]: the first stage's calls
  std::vector<StepExecutor*> executors;
  for (AnalyticExecutor& run : runs) executors.push_back(&run);
  walk_classes(program, executors);
  for (size_t c = 0; c < runs.size(); ++c) {
    const AnalyticExecutor& run = runs[c];
    r.stages.push_back({program.classes[c].stage, run.phase_busy_s(Phase::forward), run.phase_busy_s(Phase::backward),
                        run.phase_busy_s(Phase::optimizer), run.blocking_comm_s() - run.context_comm_s(), run.p2p_s(),
                        run.waited_comm_s(), run.comm_busy_s(), run.bubble_s(), run.step_s(), 0, run.context_comm_s()});
  }
  append_comm(runs.front(), program.classes.front(), program, r);
  report_stages(plan, r);
  const StageTiming& t = r.stages.at(static_cast<size_t>(r.reported_stage));
  e.compute_s = t.forward_s + t.backward_s + t.optimizer_s;
  for (size_t c = 0; c < runs.size(); ++c)
    if (program.classes[c].stage == r.reported_stage) r.compute_by_kind = runs[c].by_kind();
  e.single_gpu_step_s = e.compute_s;
  e.perfect_overlap_step_s = r.step_time_s;
  e.no_overlap_step_s = r.no_overlap_step_s;
  r.bounds =
      StepBounds{bound(plan, e.single_gpu_step_s, e.perfect_overlap_step_s, r.exposed_comm_s),
                 bound(plan, e.single_gpu_step_s, e.no_overlap_step_s, std::max(r.exposed_comm_s, r.comm_busy_s))};
  fill_throughput(plan, r);
  r.scaling_efficiency = r.bounds->perfect_overlap.scaling_efficiency;
  fill_training_cost(s, r);
  return e;
}

}  // namespace

Estimate estimate(const Scenario& s, const StepPlan& plan) {
  Estimate e;
  StepResult& r = e.result;
  r.mode = "estimate";
  const StepProgram program = make_step_program(plan);
  fill_common(s, plan, program, r);
  e.largest_model_parameters =
      s.topology.gpu.memory_bytes /
      sharded_model_state_bytes(1.0,
                                model_state_parts(s.training.param_dtype, s.training.grad_dtype, s.training.optimizer,
                                                  s.training.master_weights),
                                plan.sharded.sharding, plan.sharded.shards);
  if (plan.pipeline.stages > 1) return estimate_pipeline(s, plan, program, e);
  AnalyticExecutor run(s, plan, program);
  walk_program(program, program.classes.front(), run);
  r.forward_s = run.phase_busy_s(Phase::forward);
  r.backward_s = run.phase_busy_s(Phase::backward);
  r.optimizer_s = run.phase_busy_s(Phase::optimizer);
  r.comm_busy_s = run.comm_busy_s();
  r.context_comm_s = run.context_comm_s();
  r.tensor_comm_s = run.blocking_comm_s() - r.context_comm_s;
  e.compute_s = r.forward_s + r.backward_s + r.optimizer_s;
  r.compute_by_kind = run.by_kind();
  if (plan.sharded.sharding == Sharding::none && plan.overlap_grad_reduce) {
    // Only the synchronized micro-step's backward can hide communication.
    r.exposed_comm_s = std::max(0.0, r.comm_busy_s - run.synced_backward_s());
  } else {
    // Sharded: gathers wait on the forward and backward too; without overlap the buckets wait for the backward. The
    // program's order (a clock per stream) says what the compute waits for.
    r.exposed_comm_s = std::max(0.0, run.step_s() - e.compute_s - r.blocking_comm_s());
  }
  append_comm(run, program.classes.front(), program, r);
  e.perfect_overlap_step_s = e.compute_s + r.blocking_comm_s() + r.exposed_comm_s;
  e.no_overlap_step_s = e.compute_s + r.blocking_comm_s() + r.comm_busy_s;
  e.single_gpu_step_s = e.compute_s;
  // The stable keys (step.time_s, throughput, scaling_efficiency) carry the perfect-overlap bound; "bounds" has both.
  r.bounds = StepBounds{bound(plan, e.single_gpu_step_s, e.perfect_overlap_step_s, r.exposed_comm_s),
                        bound(plan, e.single_gpu_step_s, e.no_overlap_step_s, r.comm_busy_s)};
  r.step_time_s = e.perfect_overlap_step_s;
  r.no_overlap_step_s = e.no_overlap_step_s;
  fill_throughput(plan, r);
  r.scaling_efficiency = r.bounds->perfect_overlap.scaling_efficiency;
  fill_training_cost(s, r);
  return e;
}

}  // namespace dpsim
