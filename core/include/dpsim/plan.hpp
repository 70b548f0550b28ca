#pragma once
// StepPlan: what one data-parallel training step does, made once by a pure function and executed
// by the simulator (virtual time), the GPU backend (real kernels) and the estimator (closed form).
#include <cstdint>
#include <string>
#include <vector>

#include "dpsim/groups.hpp"
#include "dpsim/model.hpp"
#include "dpsim/scenario.hpp"
#include "dpsim/sharding.hpp"

namespace dpsim {

// A tensor-parallel collective around an op (model.hpp TensorComm) for the whole micro-batch.
struct TensorCall {
  CollectiveKind kind = CollectiveKind::all_reduce;
  bool backward = false;  // in the op's backward; else in its forward
  bool before = false;    // before the op's compute; else after it
  double bytes = 0;       // buffer S
  bool regather = false;  // model.hpp TensorComm
};

struct PlanOp {
  std::string name;
  OpKind kind = OpKind::matmul;
  double forward_flops = 0;  // for the whole micro-batch on one GPU
  double backward_flops = 0;
  double forward_bytes = 0;
  double backward_bytes = 0;             // includes the DDP grad -> bucket copy of its gradients
  double grad_copy_bytes = 0;            // that copy's part of backward_bytes: its own kernels, after the op's
  double bias_grad_bytes = 0;            // a biased linear's dY read for the bias gradient (model.hpp Op)
  std::vector<GemmShape> gemms;          // m already multiplied by the micro-batch
  std::vector<int> grads;                // indices into StepPlan::grads made ready by this op's backward
  bool recompute_forward = false;        // activation_checkpointing: its forward runs again before its backward
  std::vector<TensorCall> tensor_calls;  // tensor parallelism: blocking collectives over the tensor group, in order
  double context_kv_bytes = 0;           // context parallelism's attention: what one ring step sends (model.hpp Op)
  bool score_dropout = false;            // attention: dropout on its probabilities (model.hpp Op)
  bool causal = false;                   // attention: causal mask (model.hpp Op)
  EagerKernel eager_kernel = EagerKernel::none;  // elementwise: eager PyTorch's kernels (model.hpp Op)
  bool input_grad = true;                        // its backward computes dX (model.hpp Op)
  bool weight_grad = true;                       // and dW
  bool fp8 = false;                              // matmul: its GEMMs in FP8 (model.hpp Op)
};

struct Grad {
  std::string name;
  int64_t numel = 0;
  int64_t bytes = 0;
  int op = 0;      // index into StepPlan::ops
  int bucket = 0;  // index into StepPlan::buckets
};

struct Bucket {
  int index = 0;
  std::vector<int> grads;  // in ready order
  int64_t bytes = 0;
  int ready_after_backward_op = 0;  // position in StepPlan::backward_order after which it is complete
  int stage = 0;                    // the pipeline stage whose gradients it holds
};

struct OptimizerStep {
  int64_t parameters = 0;
  int64_t tensors = 0;  // parameter tensors
  double bytes = 0;     // memory traffic per GPU
  double kernels = 0;   // kernel launches (training.optimizer_impl)
};

struct MemoryNeed {
  double model_state_bytes = 0;  // weights + grads + optimizer state (the shard of them, sharded)
  double ddp_buffer_bytes = 0;   // bucket copies when grads are not bucket views
  double activation_bytes = 0;
  double unsharded_bytes = 0;    // zero3: the units' weights and gradients gathered in full at once
  double weight_copy_bytes = 0;  // autocast: the 16-bit copies of the weights, held from the forward to the backward
  double total_bytes() const {
    return model_state_bytes + ddp_buffer_bytes + activation_bytes + unsharded_bytes + weight_copy_bytes;
  }
};

// An FSDP unit (zero2/zero3): the ops whose parameters are gathered and reduced together, in forward order.
struct ShardUnit {
  std::string name{};      // "" is the root (what no wrapped block owns)
  std::vector<int> ops{};  // indices into StepPlan::ops, forward order
  int stage = 0;           // its pipeline stage (each virtual stage's module is wrapped on its own)
  int64_t parameters = 0;
  int64_t trainable_parameters = 0;  // of those (training.trainable)
  double gather_bytes = 0;           // all-gather buffer S: the unit's weights in param_dtype
  // reduce-scatter buffer S: its gradients in the reduce dtype; a unit with frozen and trainable tensors reduces all
  // of its FlatParameter's gradient, one with none trainable nothing (see gradient_parameters)
  double reduce_bytes = 0;
  // FSDP's docstring on use_orig_params=True: FSDP "supports mixing frozen and non-frozen, but ... the gradient memory
  // usage will be higher than expected (namely, equivalent to not freezing those parameters)".
  int64_t gradient_parameters() const { return trainable_parameters > 0 ? parameters : 0; }
};

struct Sharded {
  Sharding sharding = Sharding::none;
  int shards = 1;                   // GPUs of a sharding group, each holding 1/shards (HSDP: parallelism.shard_group)
  int replicas = 1;                 // HSDP: sharding groups, each holding a full copy (1: not hybrid)
  std::vector<ShardUnit> units;     // zero2/zero3; the root (name "") first, gathered first and kept (per stage)
  double param_per_grad_bytes = 1;  // zero1: all-gather bytes per reduce-scatter byte of a bucket
  BackwardPrefetch backward_prefetch = BackwardPrefetch::backward_pre;
  bool limit_all_gathers = true;
  // DeepSpeed stage 1/2 (scenario zero_optimization): the buckets are DeepSpeed's, all-reduced, then the update on
  // the shard and one all-gather of the 16-bit weights (core/program_deepspeed.cpp).
  bool deepspeed = false;
  bool overlap_comm = false;  // zero_optimization.overlap_comm: the reductions on a side stream
  bool forward_prefetch = false;
  bool no_sync = true;  // fsdp.no_sync: the first k-1 micro-steps under no_sync() (false: every micro-step reduces)
  bool reshard_after_forward = false;  // zero3's default (fsdp.reshard_after_forward); zero2 never reshards
  int inflight_all_gathers = 2;        // FSDP's rate limiter (data/nccl.yaml fsdp_inflight_all_gathers)
  // limit_all_gathers: block k's forward all-gather waits until block k - limiter_lag() has resharded, so that
  // many blocks are gathered at once; forward_prefetch issues each gather one block earlier, against the same
  // queue of free events (torch/distributed/fsdp/_runtime_utils.py `_unshard`, `_pre_forward_unshard`).
  int limiter_lag() const { return inflight_all_gathers + (forward_prefetch ? 1 : 0); }
  double shard_bytes(const ShardUnit& u) const;  // HSDP: the reduce-scattered shard all-reduced across replicas
};

// One pipeline stage (a GPU's share of the pipeline): what it holds, updates and keeps in flight.
struct StageNeed {
  int64_t parameters = 0;         // trainable, of the stage's ops, on one GPU (1/t of the split tensors)
  int64_t frozen_parameters = 0;  // frozen (core/trainable.cpp): weights only
  OptimizerStep optimizer;
  MemoryNeed memory;
  double final_copy_bytes = 0;  // its buckets copied back into the gradients (no bucket views)
  int in_flight = 1;            // micro-batch chunks whose activations it holds at once (pipeline_schedule.hpp)
};

// Pipeline parallelism (Narayanan et al. 2021): the ops' virtual stages, the schedule, the activations sent between
// stages. stages = 1: no pipeline (every op on the one stage).
struct PipelinePlan {
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  int stages = 1;
  int virtual_stages = 1;
  int micro_batches = 1;
  std::vector<int> virtual_stage_of_op;  // per op: chunk x stages + stage (pipeline_schedule.hpp virtual_stage)
  // Bytes one GPU sends to the next stage per micro-batch (and its gradient back): micro-batch x sequence x hidden in
  // the activation dtype, the sequence split over the tensor group with sequence parallelism (Megatron-LM
  // megatron/core/pipeline_parallel/schedules.py get_tensor_shapes, lines 2137-2143 at d98e8a6).
  double boundary_bytes = 0;
  // A tied word embedding: the gradient of the last stage's copy (its 1/t vocabulary shard), all-reduced with the first
  // stage's over the embedding group after the data-parallel reductions, before the optimizer (megatron/training.py
  // :376-397 @6985e58938; megatron/core/distributed/finalize_model_grads.py:258 and :676 at d98e8a6). 0: untied.
  double embedding_grad_bytes = 0;
  std::vector<StageNeed> stage;  // per stage
  int stage_of(int op) const {
    return virtual_stage_of_op.empty() ? 0 : virtual_stage_of_op[static_cast<size_t>(op)] % stages;
  }
  int chunk_of(int op) const {
    return virtual_stage_of_op.empty() ? 0 : virtual_stage_of_op[static_cast<size_t>(op)] / stages;
  }
};

struct StepPlan {
  std::string scenario;
  int world_size = 1;
  ParallelDims dims;  // data x tensor x context x pipeline = world_size; dims.shard: HSDP's shard group
  int64_t micro_batch = 1;
  int64_t sequence_length = 1;
  int64_t gradient_accumulation = 1;
  int64_t samples_per_step = 1;      // Scenario::samples_per_step
  int64_t parameters = 0;            // what one GPU holds (1/t of the split tensors under tensor parallelism)
  int64_t trainable_parameters = 0;  // of those, the trainable ones (training.trainable; all of them by default)
  int64_t gradient_bytes = 0;        // of the trainable ones
  int64_t model_parameters = 0;      // the whole model's
  // Model FLOPs of one sample, forward and backward, the whole model (Megatron-LM's count: no recomputation,
  // causal attention halved; megatron/training/training.py num_floating_point_operations).
  double model_flops_per_sample = 0;
  std::vector<PlanOp> ops;          // forward order
  std::vector<int> backward_order;  // op indices in backward order
  std::vector<Grad> grads;          // gradient-ready order
  std::vector<Bucket> buckets;      // launch order
  OptimizerStep optimizer;
  MemoryNeed memory;
  double final_copy_bytes = 0;  // bucket -> grad copy after the last all-reduce (no bucket views)
  Sharded sharded;
  bool overlap_grad_reduce = true;  // ddp.overlap_grad_reduce: buckets reduced as the last backward fills them
  TpCommOverlap tp_comm_overlap = TpCommOverlap::none;  // parallelism.tp_comm_overlap (program_builder.hpp compute_op)
  PipelinePlan pipeline;  // with pipeline stages, optimizer/memory/final_copy_bytes above are the largest stage's
};

// What stage `stage` of the plan updates and copies back (-1, or no pipeline: the plan's own).
const OptimizerStep& optimizer_of(const StepPlan& plan, int stage);
double final_copy_bytes_of(const StepPlan& plan, int stage);

StepPlan make_step_plan(const Scenario& scenario);

// PyTorch DDP's compute_bucket_assignment_by_size over tensors in ready order:
// limits [first, cap, cap, ...]; a bucket closes once its size >= its limit (the crossing tensor stays).
std::vector<std::vector<int>> assign_buckets(const std::vector<int64_t>& tensor_bytes, double first_bucket_bytes,
                                             double bucket_cap_bytes);

// DeepSpeed's gradient buckets (stage_1_and_2.py:939-975, reduce_independent_p_g_buckets_and_remove_grads) over
// tensors in the order DeepSpeed reduces them: a tensor that would take the open bucket above
// `reduce_bucket_elements` first flushes it (an empty bucket issues nothing), so a larger tensor is a bucket of its
// own; the epilogue flushes the last.
std::vector<std::vector<int>> deepspeed_buckets(const std::vector<int64_t>& tensor_numel,
                                                int64_t reduce_bucket_elements);

double model_state_bytes_per_parameter(Dtype param_dtype, Dtype grad_dtype, Optimizer optimizer, bool master_weights);
// Memory traffic per parameter of one optimizer step as `impl` runs it, with `param_dtype` weights and
// `grad_dtype` gradients (an fp32 master copy and fp32 state when the weights are 16-bit and master_weights, else the
// state in the weights' dtype).
double optimizer_bytes_per_parameter(Optimizer optimizer, OptimizerImpl impl, Dtype param_dtype, Dtype grad_dtype,
                                     bool master_weights);
// Kernel launches of one optimizer step over `tensors` parameter tensors as `impl` runs it.
double optimizer_kernels(Optimizer optimizer, OptimizerImpl impl, Dtype param_dtype, int64_t tensors,
                         bool master_weights);

}  // namespace dpsim
