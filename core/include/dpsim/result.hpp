#pragma once
// StepResult: the one schema that estimate, predict and measure print (keys in DESIGN.md).
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace dpsim {

inline constexpr int kSchemaVersion = 2;  // 2 adds comm[], parallelism and memory.unsharded_bytes_per_gpu

struct BucketTiming {
  int index = 0;
  long long bytes = 0;
  double ready_s = 0;
  double start_s = 0;
  double end_s = 0;
  std::string algorithm;
  std::string protocol;
};

// One collective of the step (schema 2's comm[]): `bytes` is its buffer size S as nccl-tests prints it; `kind` and
// `group` are CollectiveKind and GroupKind names; (kind, group, index) identifies it across predict and measure.
struct CommTiming {
  std::string kind;
  std::string group;
  int index = 0;
  double bytes = 0;
  std::string stream;
  double ready_s = 0;  // when its input was complete; -1 when not known
  double start_s = 0;
  double end_s = 0;
  std::string algorithm;
  std::string protocol;
};

struct TimelineEvent {  // for Chrome traces: one per compute op or collective on one GPU
  int rank = 0;
  std::string track;  // "compute" | "comm"
  std::string name;
  double start_s = 0;
  double end_s = 0;
};

struct Spread {  // measured figures: median, p10, p90 over timed iterations
  double median = 0, p10 = 0, p90 = 0;
};

// One pipeline stage's step (result.stages[]): where its GPU's time goes. compute + tensor + p2p + exposed + bubble
// = the stage's step time (the compute stream's), up to the optimizer's own collectives.
struct StageTiming {
  int stage = 0;
  double forward_s = 0, backward_s = 0, optimizer_s = 0;  // compute
  double tensor_comm_s = 0;                               // blocking tensor-parallel collectives
  double p2p_s = 0;                                       // blocking sends to the neighbouring stages
  double exposed_comm_s = 0;                              // waiting for its data-parallel reductions
  double comm_busy_s = 0;                                 // its comm streams' collectives (data parallelism's)
  double bubble_s = 0;                                    // waiting for the other stages (the pipeline bubble)
  double end_s = 0;                                       // when its step ends
  double memory_need_bytes = 0;                           // as StepResult::memory_need_bytes, for this stage
  double context_comm_s = 0;  // what context parallelism's ring exchanges leave exposed (part of the compute stream's)
};

// What the step costs and how long the whole run takes (core/training_cost.cpp). Each figure is present only when
// its inputs are: price figures need cluster.price_per_gpu_hour, time needs training.total_tokens or total_samples.
struct TrainingCost {
  int gpus = 0;  // GPUs billed: the world size
  std::optional<double> price_per_gpu_hour;
  std::optional<double> per_step;            // price x gpus x step time / 3600
  std::optional<double> per_million_tokens;  // per_step / tokens per step x 1e6 (token models only)
  std::optional<double> to_train;            // price x gpus x time_to_train_s / 3600
  std::optional<double> steps_to_train;      // ceil(total / per-step tokens or samples)
  std::optional<double> time_to_train_s;     // steps_to_train x step time
};

// One end of the closed form's bracket (estimate): the step with communication fully hidden behind the
// synchronized backward (perfect overlap) or fully serialized after it (no overlap).
struct StepBound {
  double step_time_s = 0;
  double exposed_comm_s = 0;
  double samples_per_s = 0;
  double scaling_efficiency = 0;
};

struct StepBounds {
  StepBound perfect_overlap;
  StepBound no_overlap;
};

// Where one GPU's compute time goes in a step, by op kind (the reported stage's with pipeline stages): GEMMs (matmul
// ops, with DDP's copy of their gradients into the buckets), the attention cores, memory-bound ops (norms, activations,
// residuals, dropout, casts, embedding, loss) and the optimizer step with the final gradient copies. Recomputed
// forwards count in their op's kind. The FLOPs are those the kernels execute (compute_cost.hpp executed_flops), the
// bytes those the memory-bound ops move.
struct ComputeByKind {
  double gemm_s = 0;
  double gemm_flops = 0;
  double attention_s = 0;
  double attention_flops = 0;
  double memory_bound_s = 0;
  double memory_bound_bytes = 0;
  double optimizer_s = 0;
  double total_s() const { return gemm_s + attention_s + memory_bound_s + optimizer_s; }
};

struct StepResult {
  std::string scenario;
  std::string mode;  // estimate | predict | measure
  nlohmann::json context = nlohmann::json::object();

  long long parameters = 0;          // the whole model's (JSON model.parameters)
  long long parameters_per_gpu = 0;  // what one GPU holds: 1/tensor of the split tensors (model.parameters_per_gpu)
  long long gradient_bytes = 0;      // of one GPU's parameters: what it all-reduces over its data-parallel group
  // training.trainable other than all: what trains, and how many of one GPU's parameters (model.trainable,
  // model.trainable_parameters); absent when every parameter trains.
  std::string trainable;
  std::optional<long long> trainable_parameters;

  double model_state_bytes_per_gpu = 0;
  double activation_bytes_per_gpu = 0;
  double ddp_buffer_bytes_per_gpu = 0;
  double unsharded_bytes_per_gpu = 0;    // zero3: units gathered in full at once
  double weight_copy_bytes_per_gpu = 0;  // autocast: 16-bit copies of the weights (memory.weight_copy_bytes_per_gpu)
  // What the process holds beside the model (data/gpus.yaml kernels, data/nccl.yaml communicator_memory).
  double cuda_context_bytes_per_gpu = 0;
  double cublas_workspace_bytes_per_gpu = 0;
  int nccl_communicators = 0;  // process groups a rank communicates over (more than one rank each)
  double nccl_bytes_per_gpu = 0;
  double runtime_bytes_per_gpu() const {
    return cuda_context_bytes_per_gpu + cublas_workspace_bytes_per_gpu + nccl_bytes_per_gpu;
  }
  double gpu_memory_bytes = 0;
  bool fits = false;
  double memory_need_bytes() const {  // what `fits` compares with gpu_memory_bytes
    return model_state_bytes_per_gpu + activation_bytes_per_gpu + ddp_buffer_bytes_per_gpu + unsharded_bytes_per_gpu +
           weight_copy_bytes_per_gpu + runtime_bytes_per_gpu();
  }

  double allreduce_bytes_sent_per_gpu = 0;
  double allreduce_time_s = 0;  // ideal ring at link bandwidth, one message (DESIGN.md)
  double allreduce_busbw_GBps = 0;
  std::string allreduce_algorithm = "ring";
  double nccl_time_s = 0;  // the same message as NCCL's model runs it
  double nccl_busbw_GBps = 0;
  std::string nccl_algorithm;
  std::string nccl_protocol;

  double step_time_s = 0;
  double forward_s = 0;
  double backward_s = 0;
  double exposed_comm_s = 0;
  double optimizer_s = 0;
  double comm_busy_s = 0;     // sum of the durations of the collectives on comm streams (data parallelism's)
  double tensor_comm_s = 0;   // tensor parallelism's collectives, on the compute stream: all of it exposed
  double context_comm_s = 0;  // what context parallelism's ring exchanges leave exposed, on the compute stream
  double blocking_comm_s() const { return tensor_comm_s + context_comm_s; }
  double p2p_s = 0;                 // pipeline parallelism's sends, on the compute stream
  double pipeline_bubble_s = 0;     // the reported stage waiting for the others
  int reported_stage = 0;           // the stage the step.* breakdown describes: the one with the most compute
  std::vector<StageTiming> stages;  // per pipeline stage; empty without pipeline parallelism
  double no_overlap_step_s = 0;     // compute + all communication, serialized

  double samples_per_s = 0;
  double tokens_per_s = 0;
  double model_flops_per_s_per_gpu = 0;  // Megatron-LM's model FLOPs (docs/metrics.md) per second, per GPU
  double mfu = 0;                        // model_flops_per_s_per_gpu / the GPU's peak in the training dtype
  double peak_flops_per_s = 0;           // that peak
  // The FLOPs each GPU runs in matmuls and attention (recomputation included) per second: Megatron-LM's papers'
  // "achieved teraFLOP/s per GPU" (compute_cost.hpp executed_flops), and its share of the peak (PaLM's HFU).
  double hardware_flops_per_s_per_gpu = 0;
  double hfu = 0;
  double hardware_flops_per_step_per_gpu = 0;  // not serialized: fill_common's, for fill_throughput
  double scaling_efficiency = 0;
  TrainingCost cost;

  std::optional<StepBounds> bounds;  // estimate: both ends of the bracket (JSON "bounds"); predict/measure: none
  std::optional<ComputeByKind> compute_by_kind;  // estimate: JSON "compute"; predict/measure: none

  int data_parallel = 1;
  int tensor_parallel = 1;
  int context_parallel = 1;
  int data_group_gpus() const { return data_parallel * context_parallel; }  // the gradients' group: data x context
  int pipeline_parallel = 1;
  std::string pipeline_schedule;  // with pipeline stages: gpipe, 1f1b, interleaved_1f1b
  int virtual_stages = 1;
  bool sequence_parallel = false;
  std::string tp_comm_overlap = "none";  // parallelism.tp_comm_overlap (to_string(TpCommOverlap))
  std::string tensor_impl = "megatron";  // parallelism.tensor_impl (to_string(TensorImpl))
  std::string sharding = "none";         // parallelism.sharding as dpsim names it (to_string(Sharding))
  int shard_group = 0;                   // HSDP: GPUs per sharding group (parallelism.shard_group); 0: not hybrid
  std::vector<BucketTiming> buckets;
  std::vector<CommTiming> comm;
  std::vector<TimelineEvent> timeline;                // not serialized into the result JSON; used for traces
  nlohmann::json spreads = nlohmann::json::object();  // measure: {"step.time_s": {median,p10,p90}, ...}
  std::vector<std::string> advice;
};

nlohmann::json to_json(const StepResult& result);
StepResult result_from_json(const nlohmann::json& json);  // throws InputError on a missing key
StepResult read_result(const std::filesystem::path& file);

// Write text to `file` through a temporary file and a rename: never a half-written file.
void write_file_atomic(const std::filesystem::path& file, const std::string& text);

// Write the whole of `text` to the descriptor `fd` (a pipe to a parent or a child), through short writes and EINTR;
// false on an error (the reader is gone, a full disk).
bool write_all(int fd, std::string_view text);

}  // namespace dpsim
