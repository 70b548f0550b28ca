// Pipeline schedules as Megatron-LM runs them. Sources (NVIDIA/Megatron-LM at commit
// d98e8a64ddf34856e74b24714e3bedb2f5a39553), all under megatron/:
//   core/pipeline_parallel/schedules.py: forward_backward_pipelining_without_interleaving (1F1B),
//     forward_backward_pipelining_with_interleaving, get_pp_rank_microbatches, get_schedule_table;
//   core/model_parallel_config.py __post_init__ (microbatch_group_size_per_vp_stage defaults to the pipeline size);
//   core/parallel_state.py initialize_model_parallel, training/arguments.py validate_args (when interleaving runs);
//   core/transformer/transformer_block.py get_num_layers_to_build, core/transformer/transformer_layer.py
//     get_transformer_layer_offset, core/transformer/pipeline_parallel_layer_layout.py (the layer split).
// GPipe: Huang et al. 2019, arXiv 1811.06965, Figure 2(c): every micro-batch's forward, then the backwards.
#include "dpsim/pipeline_schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <set>
#include <utility>

#include "dpsim/error.hpp"

namespace dpsim {

const char* to_string(PipelineSchedule schedule) {
  switch (schedule) {
    case PipelineSchedule::gpipe: return "gpipe";
    case PipelineSchedule::one_f_one_b: return "1f1b";
    case PipelineSchedule::interleaved_one_f_one_b: return "interleaved_1f1b";
  }
  return "?";
}

std::optional<PipelineSchedule> pipeline_schedule_named(std::string_view name) {
  for (PipelineSchedule s :
       {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b, PipelineSchedule::interleaved_one_f_one_b})
    if (name == to_string(s)) return s;
  return std::nullopt;
}

namespace {

void check_degrees(int stages, int virtual_stages) {
  if (stages < 1) throw InputError(fmt::format("pipeline stages must be >= 1, got {}", stages));
  if (virtual_stages < 1) throw InputError(fmt::format("virtual_stages must be >= 1, got {}", virtual_stages));
}

// Interleaving's micro-batch group: model_parallel_config.py __post_init__, "if
// self.microbatch_group_size_per_vp_stage is None: self.microbatch_group_size_per_vp_stage =
// self.pipeline_model_parallel_size" (the depth-first schedule of the paper). dpsim has no knob for it.
int interleaving_group(int stages) { return stages; }

void check_interleaving(int stages, int micro_batches, int virtual_stages) {
  // parallel_state.py initialize_model_parallel: "pipeline-model-parallel size should be greater than 1 with
  // interleaved schedule".
  if (stages < 2)
    throw InputError(
        fmt::format("interleaved_1f1b needs at least 2 pipeline stages, got {} (Megatron: "
                    "\"pipeline-model-parallel size should be greater than 1 with interleaved schedule\")",
                    stages));
  // arguments.py validate_args: "if args.virtual_pipeline_model_parallel_size == 1:
  // args.virtual_pipeline_model_parallel_size = None", which selects the non-interleaved schedule.
  if (virtual_stages < 2)
    throw InputError(
        fmt::format("interleaved_1f1b needs virtual_stages >= 2, got {} (with one model chunk per "
                    "stage Megatron runs 1f1b)",
                    virtual_stages));
  const int group = interleaving_group(stages);
  // forward_backward_pipelining_with_interleaving: "The number of contiguous micro-batches in a virtual pipeline
  // stage should range in [PP={pipeline_parallel_size} , M={num_microbatches}]" (ValueError).
  if (group > micro_batches)
    throw InputError(
        fmt::format("interleaved_1f1b needs at least as many micro-batches per step as pipeline "
                    "stages, got {} micro-batches for {} stages (Megatron: \"The number of contiguous "
                    "micro-batches in a virtual pipeline stage should range in [PP={}, M={}]\")",
                    micro_batches, stages, stages, micro_batches));
  // Same function: "if 0 < final_microbatch_group_size < pipeline_parallel_size: ... The remainder of M (the total
  // micro-batches) divided by N (number of contiguous micro-batches in a virtual pipeline stage) should be 0, or
  // larger than or equal to the pipeline-parallel size" (RuntimeError). With N = PP: M a multiple of PP.
  const int remainder = micro_batches % group;
  if (remainder > 0 && remainder < stages)
    throw InputError(
        fmt::format("interleaved_1f1b needs the micro-batches per step ({}) to be a multiple of the "
                    "pipeline stages ({}): Megatron refuses a remainder of {} (\"it introduces "
                    "dependency bubbles in the pipeline and reduces throughput\")",
                    micro_batches, stages, remainder));
}

// The (micro-batch, chunk) of each forward in issue order: get_schedule_table(num_microbatches, num_model_chunks,
// microbatch_group_size_per_vp_stage), groups of `group` micro-batches run through every chunk before the next
// group (the last group takes what is left). Its docstring's example, PP2 N3 M5 VP2: micro-batches 0 1 2 0 1 2 3 4
// 3 4 on chunks 0 0 0 1 1 1 0 0 1 1.
std::vector<std::pair<int, int>> schedule_table(int micro_batches, int chunks, int group) {
  std::vector<std::pair<int, int>> table;
  for (int first = 0; first < micro_batches; first += group) {
    const int end = first + group >= micro_batches ? micro_batches : first + group;
    for (int chunk = 0; chunk < chunks; ++chunk)
      for (int micro = first; micro < end; ++micro) table.emplace_back(micro, chunk);
  }
  return table;
}

// How many forwards a stage runs before its first backward.
int warmup_forwards(PipelineSchedule schedule, int stages, int micro_batches, int virtual_stages, int rank) {
  const int total = micro_batches * virtual_stages;
  switch (schedule) {
    case PipelineSchedule::gpipe: return total;
    case PipelineSchedule::one_f_one_b:
      // forward_backward_pipelining_without_interleaving: "num_warmup_microbatches = p2p_communicator.total_stages
      // - p2p_communicator.current_stage - 1; num_warmup_microbatches = min(num_warmup_microbatches,
      // num_microbatches)".
      return std::min(stages - rank - 1, micro_batches);
    case PipelineSchedule::interleaved_one_f_one_b: {
      // get_pp_rank_microbatches: "num_warmup_microbatches = (pipeline_parallel_size - pipeline_parallel_rank - 1)
      // * 2; num_warmup_microbatches += (num_model_chunks - 1) * microbatch_group_size_per_vp_stage", then "if
      // num_warmup_microbatches >= total_num_microbatches: num_warmup_microbatches = total_num_microbatches"
      // (are_all_microbatches_in_warmup: with M = PP the first stages run every forward first).
      const int warmup = (stages - rank - 1) * 2 + (virtual_stages - 1) * interleaving_group(stages);
      return std::min(warmup, total);
    }
  }
  return total;
}

// One stage's slots: `warmup` forwards, then the steady state (forward k + warmup, then backward k: the loop "for k
// in range(num_microbatches_remaining): forward_k = k + num_warmup_microbatches ... backward_k = k"), then the
// cool-down backwards. Forward k runs table[k]; backward k runs table[k]'s micro-batch on the chunk
// get_model_chunk_id(k, forward=False) gives: "model_chunk_id = num_model_chunks - model_chunk_id - 1" (chunks in
// reverse; each chunk's backwards pop its inputs first in, first out, so in the micro-batch order of its forwards).
std::vector<PipelineSlot> stage_slots(const std::vector<std::pair<int, int>>& table, int chunks, int warmup) {
  const int total = static_cast<int>(table.size());
  auto forward = [&](int k) { return PipelineSlot{true, table[k].first, table[k].second}; };
  auto backward = [&](int k) { return PipelineSlot{false, table[k].first, chunks - 1 - table[k].second}; };
  std::vector<PipelineSlot> slots;
  slots.reserve(2 * table.size());
  for (int k = 0; k < warmup; ++k) slots.push_back(forward(k));
  for (int k = 0; k < total - warmup; ++k) {
    slots.push_back(forward(k + warmup));
    slots.push_back(backward(k));
  }
  for (int k = total - warmup; k < total; ++k) slots.push_back(backward(k));
  return slots;
}

}  // namespace

void check_pipeline_schedule(PipelineSchedule schedule, int stages, int micro_batches, int virtual_stages) {
  check_degrees(stages, virtual_stages);
  if (micro_batches < 1) throw InputError(fmt::format("micro-batches per step must be >= 1, got {}", micro_batches));
  if (static_cast<long long>(micro_batches) * virtual_stages > INT_MAX / 2)
    throw InputError(fmt::format("{} micro-batches x {} virtual stages is too many compute slots per stage",
                                 micro_batches, virtual_stages));
  if (schedule == PipelineSchedule::interleaved_one_f_one_b)
    return check_interleaving(stages, micro_batches, virtual_stages);
  if (virtual_stages != 1)
    throw InputError(
        fmt::format("virtual_stages {} needs schedule interleaved_1f1b ({} runs one model chunk per "
                    "stage)",
                    virtual_stages, to_string(schedule)));
}

std::vector<std::vector<PipelineSlot>> pipeline_schedule(PipelineSchedule schedule, int stages, int micro_batches,
                                                         int virtual_stages) {
  check_pipeline_schedule(schedule, stages, micro_batches, virtual_stages);
  // Without interleaving the table is micro-batches 0..m-1 on chunk 0 (forward_backward_pipelining_without_
  // interleaving pops input_tensors first in, first out: backwards in forward order). GPipe runs them the same way
  // after all forwards (as PyTorch's ScheduleGPipe, torch/distributed/pipelining/schedules.py, does).
  const int group = schedule == PipelineSchedule::interleaved_one_f_one_b ? interleaving_group(stages) : micro_batches;
  const std::vector<std::pair<int, int>> table = schedule_table(micro_batches, virtual_stages, group);
  std::vector<std::vector<PipelineSlot>> result;
  result.reserve(stages);
  for (int rank = 0; rank < stages; ++rank)
    result.push_back(
        stage_slots(table, virtual_stages, warmup_forwards(schedule, stages, micro_batches, virtual_stages, rank)));
  return result;
}

int pipeline_warmup_forwards(PipelineSchedule schedule, int stages, int micro_batches, int virtual_stages, int rank) {
  check_pipeline_schedule(schedule, stages, micro_batches, virtual_stages);
  return warmup_forwards(schedule, stages, micro_batches, virtual_stages, rank);
}

namespace {

// The most of `weight` summed over the (micro-batch, chunk) pairs held at once: forwarded and not yet backwarded; a
// backward of a pair never forwarded releases nothing.
template <class Weight>
double peak_held(const std::vector<PipelineSlot>& stage_slots, Weight weight) {
  std::set<std::pair<int, int>> held;
  double now = 0, most = 0;
  for (const PipelineSlot& s : stage_slots) {
    if (s.forward) {
      if (held.emplace(s.micro, s.chunk).second) now += weight(s.chunk);
      most = std::max(most, now);
    } else if (held.erase({s.micro, s.chunk}) > 0) {
      now -= weight(s.chunk);
    }
  }
  return most;
}

}  // namespace

double peak_held_bytes(const std::vector<PipelineSlot>& stage_slots, const std::vector<double>& kept_per_chunk) {
  return peak_held(stage_slots, [&](int chunk) { return kept_per_chunk.at(static_cast<size_t>(chunk)); });
}

int max_in_flight(const std::vector<PipelineSlot>& stage_slots) {
  return static_cast<int>(peak_held(stage_slots, [](int) { return 1.0; }));
}

namespace {

// get_num_layers_to_build without a custom layout or uneven first/last stages: "assert num_layers %
// config.pipeline_model_parallel_size == 0, f\"{num_layers=} should be divisible by
// {config.pipeline_model_parallel_size=}\"", then with interleaving "assert num_layers_per_pipeline_rank % vp_size
// == 0, f\"num_layers_per_pipeline_rank {num_layers_per_pipeline_rank} should be divisible by vp_size {vp_size}\"";
// every virtual stage builds num_layers_per_pipeline_rank // vp_size layers, at get_transformer_layer_offset's
// "offset = vp_stage * total_virtual_chunks + (pp_rank * num_layers_per_virtual_rank)" (its comment: 8 layers, 2
// stages, 2 chunks: stage 0 holds [0, 1] [4, 5], stage 1 [2, 3] [6, 7]).
std::vector<int> even_split(int layers, int stages, int virtual_stages) {
  if (layers % stages != 0)
    throw InputError(
        fmt::format("{} layers do not split evenly over {} pipeline stages (Megatron asserts \"num_layers "
                    "should be divisible by pipeline_model_parallel_size\"); give the layers per stage",
                    layers, stages));
  const int per_stage = layers / stages;
  if (per_stage % virtual_stages != 0)
    throw InputError(
        fmt::format("{} layers per pipeline stage do not split evenly over {} virtual stages (Megatron "
                    "asserts \"num_layers_per_pipeline_rank {} should be divisible by vp_size {}\"); "
                    "give the layers per virtual stage",
                    per_stage, virtual_stages, per_stage, virtual_stages));
  return std::vector<int>(static_cast<size_t>(stages) * virtual_stages, per_stage / virtual_stages);
}

// An explicit split is Megatron's pipeline_model_parallel_layout: one entry per virtual stage in model order
// (pipeline_parallel_layer_layout.py, "layout[vpp_rank * pipeline_model_parallel_size + pp_rank]"), whose decoder
// layers must add up to num_layers (validate_layer_layout: "Number of decoder layers ... must match num_layers").
void check_explicit_split(int layers, int stages, int virtual_stages, const std::vector<int>& explicit_layers) {
  const size_t want = static_cast<size_t>(stages) * virtual_stages;
  if (explicit_layers.size() != want)
    throw InputError(fmt::format("the layer split has {} entries; {} pipeline stages x {} virtual stages need {}",
                                 explicit_layers.size(), stages, virtual_stages, want));
  long long sum = 0;
  for (size_t k = 0; k < explicit_layers.size(); ++k) {
    if (explicit_layers[k] < 1)
      throw InputError(fmt::format("the layer split gives virtual stage {} {} layers; each needs at least 1", k,
                                   explicit_layers[k]));
    sum += explicit_layers[k];
  }
  if (sum != layers)
    throw InputError(fmt::format("the layer split adds up to {} layers; the model has {}", sum, layers));
}

}  // namespace

std::vector<int> split_layers(int layers, int stages, int virtual_stages, const std::vector<int>& explicit_layers) {
  check_degrees(stages, virtual_stages);
  if (layers < 1) throw InputError(fmt::format("the model needs at least 1 layer to split, got {}", layers));
  if (explicit_layers.empty()) return even_split(layers, stages, virtual_stages);
  check_explicit_split(layers, stages, virtual_stages, explicit_layers);
  return explicit_layers;
}

}  // namespace dpsim
