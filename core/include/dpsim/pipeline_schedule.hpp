#pragma once
// Pipeline parallelism's step schedule, as Megatron-LM runs it (megatron/core/pipeline_parallel/schedules.py,
// NVIDIA/Megatron-LM at d98e8a64): which forward and backward passes each pipeline stage runs in one step, in
// order; how many micro-batch activations a stage holds; how the layers are split over the (virtual) stages; and
// the step time of a schedule with uniform pass times (the reference for the simulator). Pure functions; invalid
// combinations throw InputError with a message the scenario loader prefixes with file, line and key.
// Not yet wired into predict.
#include <optional>
#include <string_view>
#include <vector>

namespace dpsim {

enum class PipelineSchedule { gpipe, one_f_one_b, interleaved_one_f_one_b };
// "gpipe", "1f1b", "interleaved_1f1b" (the scenario's parallelism.schedule values); pipeline_schedule_named is the
// inverse (nullopt for any other name).
const char* to_string(PipelineSchedule schedule);
std::optional<PipelineSchedule> pipeline_schedule_named(std::string_view name);

// One compute slot of a stage: the forward or backward pass of micro-batch `micro` through the stage's model
// chunk `chunk` (0 unless the schedule is interleaved).
struct PipelineSlot {
  bool forward = true;
  int micro = 0;
  int chunk = 0;
  bool operator==(const PipelineSlot&) const = default;
};

// Model chunk `chunk` of pipeline stage `stage` is virtual stage chunk * stages + stage in model order (Megatron:
// pipeline_parallel_layer_layout.py, layout[vpp_rank * pipeline_model_parallel_size + pp_rank]).
inline int virtual_stage(int stage, int chunk, int stages) { return chunk * stages + stage; }

// Throws InputError unless `schedule` can run `micro_batches` per step over `stages` stages with `virtual_stages`
// model chunks per stage (the rules are in pipeline_schedule.cpp, each with its Megatron source).
void check_pipeline_schedule(PipelineSchedule schedule, int stages, int micro_batches, int virtual_stages);

// The compute slots each stage runs in one step, in order: result[r] is pipeline stage (pipeline rank) r's.
std::vector<std::vector<PipelineSlot>> pipeline_schedule(PipelineSchedule schedule, int stages, int micro_batches,
                                                         int virtual_stages);

// How many forwards stage `rank` runs before its first backward (its slots: that many forwards, then forward and
// backward in turn, then the remaining backwards).
int pipeline_warmup_forwards(PipelineSchedule schedule, int stages, int micro_batches, int virtual_stages, int rank);

// The most (micro-batch, chunk) activations a stage holds at once: pairs forwarded and not yet backwarded.
int max_in_flight(const std::vector<PipelineSlot>& stage_slots);

// The most activation bytes a stage holds at once: over its slots in order, the sum of kept_per_chunk[chunk] of the
// pairs forwarded and not yet backwarded. Chunks differ (the first holds the embedding, the last the output layer and
// the loss, whose vocabulary-wide logits can outweigh a chunk's layers), and an interleaved schedule holds many
// micro-batches of the early chunks but only one or two of the last: the count x the largest chunk overstates it.
double peak_held_bytes(const std::vector<PipelineSlot>& stage_slots, const std::vector<double>& kept_per_chunk);

// Transformer layers per virtual stage, in model order: element virtual_stage(r, c, stages) is the count of
// model chunk c of stage r. With `explicit_layers` empty, an even split (Megatron's get_num_layers_to_build);
// else `explicit_layers` itself (one entry per virtual stage, each >= 1, summing to `layers`), checked.
std::vector<int> split_layers(int layers, int stages, int virtual_stages, const std::vector<int>& explicit_layers);

// The step time of `schedule` (as pipeline_schedule gives it, or any slot lists of that shape) when every forward
// of one micro-batch through one chunk takes forward_s, every backward backward_s, and every activation or
// gradient sent between stages p2p_s: each stage runs its slots in the given order, the forward of a micro-batch
// on virtual stage k starts after its forward on virtual stage k-1 has ended and been sent, its backward after its
// backward on virtual stage k+1 (and its own forward). Throws InputError when the lists are not a complete
// schedule or cannot run in their order (a deadlock), naming the stage and the slot that waits.
double ideal_step_time(const std::vector<std::vector<PipelineSlot>>& schedule, double forward_s, double backward_s,
                       double p2p_s);

}  // namespace dpsim
