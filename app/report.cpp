#include "report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

#include "dpsim/collective_kind.hpp"
#include "dpsim/cost.hpp"
#include "dpsim/groups.hpp"
#include "dpsim/plan.hpp"
#include "dpsim/trainable.hpp"
#include "dpsim/units.hpp"

namespace dpsim::app {

std::string gpu_memory_label(const GpuSpec& gpu) {
  const std::string& w = gpu.memory_as_written;
  const size_t unit = w.find_first_not_of("0123456789.");
  const bool binary = unit != std::string::npos && w.find('i', unit) != std::string::npos;  // KiB, MiB, GiB, TiB
  return binary ? fmt::format("{} ({} {})", format_bytes(gpu.memory_bytes), w.substr(0, unit), w.substr(unit))
                : format_bytes(gpu.memory_bytes);
}

namespace {

// What trains, as training.trainable says (a LoRA: its rank and layers; frozen_except: its patterns).
std::string trainable_label(const Scenario& s, const StepResult& r) {
  const Training& t = s.training;
  const auto count = static_cast<double>(r.trainable_parameters.value_or(0));
  const std::string what = t.trainable == Trainable::lora
                               ? fmt::format("LoRA rank {} on {}", t.lora.rank, fmt::join(t.lora.target_modules, ", "))
                               : fmt::format("frozen except {}", fmt::join(t.frozen_except, ", "));
  return fmt::format("{} ({:.4f}% of {}; {}, the rest frozen)", format_count(count),
                     100.0 * count / static_cast<double>(r.parameters_per_gpu),
                     format_count(static_cast<double>(r.parameters_per_gpu)), what);
}

}  // namespace

std::vector<Section> common_sections(const Scenario& s, const StepResult& r) {
  std::vector<Section> out;
  Section scen{fmt::format("Scenario {}", s.name), {}};
  scen.add("model", s.model.name);
  scen.add("cluster", fmt::format("{} ({} node{} x {} GPUs = {} GPUs)", s.topology.name, s.topology.nodes,
                                  s.topology.nodes > 1 ? "s" : "", s.topology.gpus_per_node, s.world_size()));
  scen.add("gpu", s.topology.gpu.name);  // the topology's, or cluster.gpu's where the scenario names another
  scen.add("parallelism", parallelism_label(s, r));
  const bool tensor = r.tensor_parallel > 1;
  std::string sharing;
  if (tensor) sharing = fmt::format("its {} tensor-parallel GPUs share it", r.tensor_parallel);
  if (r.context_parallel > 1)
    sharing +=
        fmt::format("{}its {} context-parallel GPUs split each sequence, {} tokens each", sharing.empty() ? "" : "; ",
                    r.context_parallel, s.training.sequence_length / r.context_parallel);
  scen.add("batch",
           fmt::format("micro-batch {} x sequence {} x accumulation {} per {}", s.training.micro_batch,
                       s.training.sequence_length, s.training.gradient_accumulation,
                       sharing.empty() ? std::string("GPU") : fmt::format("data-parallel replica ({})", sharing)));
  out.push_back(std::move(scen));

  Section model{"Model", {}};
  model.add("parameters", format_count(static_cast<double>(r.parameters)));
  if (tensor)
    model.add("parameters per GPU",
              fmt::format("{} (the GEMM weights and the vocabulary / {}; norms, row-parallel biases, positions whole)",
                          format_count(static_cast<double>(r.parameters_per_gpu)), r.tensor_parallel));
  if (r.trainable_parameters) model.add("trainable parameters", trainable_label(s, r));
  model.add(fmt::format("gradients{} ({})", tensor ? " per GPU" : "", to_string(trainable_dtypes(s.training).grads)),
            format_bytes(static_cast<double>(r.gradient_bytes)));
  out.push_back(std::move(model));

  Section mem{"Memory per GPU", {}};
  const TrainableDtypes dtypes = trainable_dtypes(s.training);
  const double per_param =
      model_state_bytes_per_parameter(dtypes.weights, dtypes.grads, s.training.optimizer, s.training.master_weights);
  const std::string optimizer = optimizer_state_label(s.training);
  if (r.trainable_parameters)
    mem.add("model state (fine-tune)",
            fmt::format(
                "{} (frozen weights {} B/param{}, the trainable {:.0f} B/param, {}{})",
                format_bytes(r.model_state_bytes_per_gpu), dtype_bytes(s.training.param_dtype),
                s.training.lora.quantized_base_bytes > 0 && s.training.trainable == Trainable::lora
                    ? fmt::format(", linear layers nf4 at {:g} B", s.training.lora.quantized_base_bytes)
                    : std::string(),
                per_param, optimizer,
                s.parallelism.sharding == Sharding::none ? std::string() : ", " + s.parallelism.sharding_as_written));
  else if (s.parallelism.sharding == Sharding::none)
    mem.add(fmt::format("model state ({}, {:.0f} B/param)", optimizer, per_param),
            format_bytes(r.model_state_bytes_per_gpu));
  else
    mem.add(fmt::format("model state ({}, {:.0f} B/param, {} over {} GPUs)", optimizer, per_param,
                        s.parallelism.sharding_as_written,
                        s.parallelism.hybrid ? s.parallelism.shard_group : r.data_group_gpus()),
            format_bytes(r.model_state_bytes_per_gpu));
  if (r.unsharded_bytes_per_gpu > 0)
    mem.add(unsharded_memory_label(s.parallelism.pipeline), format_bytes(r.unsharded_bytes_per_gpu));
  mem.add("activations",
          s.training.activations ? format_bytes(r.activation_bytes_per_gpu) : "not counted (activations: false)");
  if (r.weight_copy_bytes_per_gpu > 0)
    mem.add(fmt::format("autocast {} weight copies", to_string(s.training.compute())),
            format_bytes(r.weight_copy_bytes_per_gpu));
  if (s.zero_optimization)
    mem.add("DeepSpeed bucket buffers", format_bytes(r.ddp_buffer_bytes_per_gpu));
  else if (s.parallelism.sharding == Sharding::none || s.parallelism.sharding == Sharding::zero1)
    mem.add("DDP bucket buffers", format_bytes(r.ddp_buffer_bytes_per_gpu));
  mem.add("CUDA context + cuBLAS workspace",
          format_bytes(r.cuda_context_bytes_per_gpu + r.cublas_workspace_bytes_per_gpu));
  mem.add(fmt::format("NCCL ({} communicator{})", r.nccl_communicators, r.nccl_communicators == 1 ? "" : "s"),
          format_bytes(r.nccl_bytes_per_gpu));
  const double need = r.memory_need_bytes();
  mem.add("total", fmt::format("{} of {}, all of {}'s memory", format_bytes(need), gpu_memory_label(s.topology.gpu),
                               s.topology.gpu.name));
  mem.add("not counted", "the caching allocator's fragmentation (no source gives a figure to reserve)");
  mem.add("fits", r.fits ? fmt::format("yes, {} left", format_bytes(r.gpu_memory_bytes - need))
                         : fmt::format("NO: short by {}", format_bytes(need - r.gpu_memory_bytes)));
  out.push_back(std::move(mem));

  out.push_back(allreduce_section(s, r));
  if (tensor) out.push_back(tensor_comm_section(r));
  if (s.parallelism.sharding != Sharding::none) out.push_back(sharded_comm_section(s, r));
  return out;
}

// One all-reduce of a GPU's gradients over its data-parallel group, as a single message (estimate.cpp fill_common).
Section allreduce_section(const Scenario& s, const StepResult& r) {
  const int group = r.data_group_gpus();
  Section ar{r.tensor_parallel > 1 || r.context_parallel > 1
                 ? fmt::format("All-reduce of a GPU's gradients as one message (over its data-parallel group of {} "
                               "GPU{}{})",
                               group, group == 1 ? "" : "s",
                               r.context_parallel > 1
                                   ? fmt::format(", data {} x context {}", r.data_parallel, r.context_parallel)
                                   : "")
                 : std::string("All-reduce of all gradients as one message"),
             {}};
  if (group > 1) {
    ar.add("ring traffic per GPU", fmt::format("{} sent, {} received", format_bytes(r.allreduce_bytes_sent_per_gpu),
                                               format_bytes(r.allreduce_bytes_sent_per_gpu)));
    ar.add(fmt::format("ideal ring at {}", format_bandwidth(r.allreduce_busbw_GBps * 1e9)),
           format_seconds(r.allreduce_time_s));
    ar.add(fmt::format("NCCL model ({}/{})", r.nccl_algorithm, r.nccl_protocol),
           fmt::format("{} (busbw {})", format_seconds(r.nccl_time_s), format_bandwidth(r.nccl_busbw_GBps * 1e9)));
    const FabricSummary f = summarize_fabric(s.topology);
    if (f.intra_shm_edges > 0)  // NCCL's SHM transport on a PCIe node (core/cost nccl_uses_p2p)
      ar.add("through host memory",
             fmt::format("{} of the node ring's {} hops (NCCL's SHM, no PCIe peer-to-peer): {} staged ({}){}",
                         f.intra_shm_edges, f.intra_ring_edges, format_bandwidth(host_staged_rate(f, s.nccl)),
                         host_staged_source(f), intra_shm_bound(f, s.nccl) ? ", the node's bottleneck" : ""));
  } else if (s.world_size() > 1) {
    ar.add("time", fmt::format("none: no data-parallel all-reduce (the {} GPUs are one tensor-parallel group)",
                               s.world_size()));
  } else {
    ar.add("time", "none: one GPU");
  }
  return ar;
}

// Tensor parallelism's collectives (Megatron-LM's f and g, on the compute stream): by kind and NCCL's choice.
Section tensor_comm_section(const StepResult& r) {
  Section c{fmt::format("Tensor-parallel collectives (group of {} GPUs, on the compute stream: {})", r.tensor_parallel,
                        r.tp_comm_overlap == "none"
                            ? std::string("none hidden")
                            : "what tp_comm_overlap " + r.tp_comm_overlap + " leaves exposed beside the GEMMs"),
            {}};
  struct Sum {
    int calls = 0;
    double bytes = 0, seconds = 0;
  };
  std::map<std::string, Sum> by_choice;
  for (const CommTiming& t : r.comm) {
    if (t.group != "tensor") continue;
    Sum& k = by_choice[fmt::format("{} {}/{}", t.kind, t.algorithm, t.protocol)];
    ++k.calls;
    k.bytes += t.bytes;
    k.seconds += t.end_s - t.start_s;
  }
  for (const auto& [name, sum] : by_choice)
    c.add(name,
          fmt::format("{} calls, {} in all, {}", sum.calls, format_bytes(sum.bytes), format_seconds(sum.seconds)));
  c.add("in the step", format_seconds(r.tensor_comm_s));
  return c;
}

// The step's collectives by kind: how many, their bytes, what each rank moves, and how long they ran.
Section sharded_comm_section(const Scenario& s, const StepResult& r) {
  Section c{fmt::format("Collectives of the step ({} = {}{})", s.parallelism.sharding_as_written, r.sharding,
                        s.zero_optimization ? ", DeepSpeed's step" : ""),
            {}};
  struct Sum {
    int calls = 0;
    double bytes = 0, moved = 0, seconds = 0;
  };
  // The ranks of each group the calls run over (HSDP: the shard and replica groups split the data group).
  const ParallelDims dims{r.data_parallel, r.tensor_parallel, 1, s.parallelism.hybrid ? s.parallelism.shard_group : 0,
                          r.context_parallel};
  std::map<std::string, Sum> by_kind;
  for (const CommTiming& t : r.comm) {
    const std::string name = t.group == "data" ? t.kind : fmt::format("{} ({} group)", t.kind, t.group);
    Sum& k = by_kind[name];
    ++k.calls;
    k.bytes += t.bytes;
    k.seconds += t.end_s - t.start_s;
    const auto kind = collective_kind_named(t.kind);
    const auto group = group_kind_named(t.group);
    if (kind && group) k.moved += bytes_moved_per_rank(*kind, group_size(*group, dims), t.bytes);
  }
  double moved = 0;
  for (const auto& [name, sum] : by_kind) {
    moved += sum.moved;
    c.add(name, fmt::format("{} calls, {} in all, {} moved per GPU, {} busy", sum.calls, format_bytes(sum.bytes),
                            format_bytes(sum.moved), format_seconds(sum.seconds)));
  }
  c.add("traffic per GPU",
        fmt::format("{} ({:.2f}x DDP's all-reduce of the gradients)", format_bytes(moved),
                    r.allreduce_bytes_sent_per_gpu > 0 ? moved / r.allreduce_bytes_sent_per_gpu : 0.0));
  return c;
}

Section step_section(const StepResult& r, const char* title) {
  Section st{title, {}};
  st.add("step time", format_seconds(r.step_time_s));
  st.add("  forward", format_seconds(r.forward_s));
  st.add("  backward", format_seconds(r.backward_s));
  if (r.tensor_parallel > 1) st.add("  tensor-parallel communication", share_of_step(r.tensor_comm_s, r.step_time_s));
  if (r.context_parallel > 1)
    st.add("  context-parallel exchange", share_of_step(r.context_comm_s, r.step_time_s) +
                                              ", what the ring's sends leave exposed beside the attention");
  st.add("  exposed communication", format_seconds(r.exposed_comm_s));
  st.add("  optimizer", format_seconds(r.optimizer_s));
  add_pipeline_rows(st, r);
  st.add("communication busy", format_seconds(r.comm_busy_s));
  st.add("without overlap", format_seconds(r.no_overlap_step_s));
  st.add("throughput", fmt::format("{:.1f} samples/s, {} tokens/s", r.samples_per_s, format_count(r.tokens_per_s)));
  add_flops_rows(st, r, "");
  st.add(scaling_label(r),
         fmt::format("{:.1f}% {}", 100.0 * r.scaling_efficiency,
                     r.tensor_parallel > 1 ? "(the GPU's own compute over the step; not vs the whole model on 1 GPU)"
                                           : "of linear vs 1 GPU"));
  return st;
}

std::string share_of_step(double seconds, double step_s) {
  return fmt::format("{} ({:.1f}% of the step)", format_seconds(seconds), step_s > 0 ? 100.0 * seconds / step_s : 0.0);
}

std::string parallelism_label(const Scenario& s, const StepResult& r) {
  std::string text = fmt::format("data {} x tensor {}", r.data_parallel, r.tensor_parallel);
  if (r.tensor_parallel > 1)
    text += fmt::format(" ({}tensor groups inside a node{}{})", r.tensor_impl == "torch" ? "PyTorch's " : "",
                        r.sequence_parallel ? ", sequence parallel" : ", no sequence parallelism",
                        r.tp_comm_overlap == "none" ? "" : ", tp_comm_overlap " + r.tp_comm_overlap);
  if (r.context_parallel > 1)
    text += fmt::format(" x context {} (keys and values passed round a ring beside the attention)", r.context_parallel);
  if (r.pipeline_parallel > 1)
    text += fmt::format(" x pipeline {} ({}{})", r.pipeline_parallel, r.pipeline_schedule,
                        r.virtual_stages > 1 ? fmt::format(", {} chunks per stage", r.virtual_stages) : "");
  if (s.parallelism.sharding != Sharding::none) text += ", sharding " + s.parallelism.sharding_as_written;
  return text;
}

void add_pipeline_rows(Section& st, const StepResult& r) {
  if (r.stages.empty()) return;
  st.add("pipeline", fmt::format("the rows above are stage {} of {} (the most compute); its bubble {}, its sends {}",
                                 r.reported_stage, r.stages.size(), share_of_step(r.pipeline_bubble_s, r.step_time_s),
                                 format_seconds(r.p2p_s)));
  for (const StageTiming& t : r.stages)
    st.add(fmt::format("  stage {}", t.stage),
           fmt::format("compute {}, tensor {}{}, sends {}, waits: data-parallel {}, other stages {}; ends at {}; "
                       "{} per GPU",
                       format_seconds(t.forward_s + t.backward_s + t.optimizer_s), format_seconds(t.tensor_comm_s),
                       r.context_parallel > 1 ? ", context " + format_seconds(t.context_comm_s) : "",
                       format_seconds(t.p2p_s), format_seconds(t.exposed_comm_s), format_seconds(t.bubble_s),
                       format_seconds(t.end_s), format_bytes(t.memory_need_bytes)));
}

void add_flops_rows(Section& st, const StepResult& r, const std::string& note) {
  const double peak = r.peak_flops_per_s;
  st.add("model FLOP/s per GPU", fmt::format("{:.1f} TFLOP/s, MFU {:.1f}% of the {:.0f} TFLOP/s peak{}",
                                             r.model_flops_per_s_per_gpu / 1e12, 100.0 * r.mfu, peak / 1e12, note));
  st.add("hardware FLOP/s per GPU", fmt::format("{:.1f} TFLOP/s, HFU {:.1f}%, recomputation counted{}",
                                                r.hardware_flops_per_s_per_gpu / 1e12, 100.0 * r.hfu, note));
}

std::string scaling_label(const StepResult& r) {
  return r.tensor_parallel > 1 ? "scaling efficiency (compute / step)" : "scaling efficiency";
}

Section advice_section(const StepResult& r) {
  Section a{"What limits this step", {}};
  for (size_t i = 0; i < r.advice.size(); ++i) a.add(fmt::format("{}.", i + 1), r.advice[i]);
  return a;
}

}  // namespace dpsim::app
