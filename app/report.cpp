#include "report.hpp"

#include <fmt/format.h>

#include <map>

#include "dpsim/collective_kind.hpp"
#include "dpsim/groups.hpp"
#include "dpsim/plan.hpp"
#include "dpsim/units.hpp"

namespace dpsim::app {

std::string gpu_memory_label(const GpuSpec& gpu) {
  const std::string& w = gpu.memory_as_written;
  const size_t unit = w.find_first_not_of("0123456789.");
  const bool binary = unit != std::string::npos && w.find('i', unit) != std::string::npos;  // KiB, MiB, GiB, TiB
  return binary ? fmt::format("{} ({} {})", format_bytes(gpu.memory_bytes), w.substr(0, unit), w.substr(unit))
                : format_bytes(gpu.memory_bytes);
}

std::vector<Section> common_sections(const Scenario& s, const StepResult& r) {
  std::vector<Section> out;
  Section scen{fmt::format("Scenario {}", s.name), {}};
  scen.add("model", s.model.name);
  scen.add("cluster", fmt::format("{} ({} node{} x {} GPUs = {} GPUs)", s.topology.name, s.topology.nodes,
                                  s.topology.nodes > 1 ? "s" : "", s.topology.gpus_per_node, s.world_size()));
  scen.add("batch", fmt::format("micro-batch {} x sequence {} x accumulation {} per GPU", s.training.micro_batch,
                                s.training.sequence_length, s.training.gradient_accumulation));
  out.push_back(std::move(scen));

  Section model{"Model", {}};
  model.add("parameters", format_count(static_cast<double>(r.parameters)));
  model.add(fmt::format("gradients ({})", to_string(s.training.grad_dtype)),
            format_bytes(static_cast<double>(r.gradient_bytes)));
  out.push_back(std::move(model));

  Section mem{"Memory per GPU", {}};
  const double per_param =
      model_state_bytes_per_parameter(s.training.param_dtype, s.training.grad_dtype, s.training.optimizer);
  if (s.parallelism.sharding == Sharding::none)
    mem.add(fmt::format("model state ({}, {:.0f} B/param)", to_string(s.training.optimizer), per_param),
            format_bytes(r.model_state_bytes_per_gpu));
  else
    mem.add(fmt::format("model state ({}, {:.0f} B/param, {} over {} GPUs)", to_string(s.training.optimizer), per_param,
                        s.parallelism.sharding_as_written,
                        s.parallelism.hybrid ? s.parallelism.shard_group : s.world_size()),
            format_bytes(r.model_state_bytes_per_gpu));
  if (r.unsharded_bytes_per_gpu > 0) mem.add("units gathered at once", format_bytes(r.unsharded_bytes_per_gpu));
  mem.add("activations",
          s.training.activations ? format_bytes(r.activation_bytes_per_gpu) : "not counted (activations: false)");
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

  Section ar{"All-reduce of all gradients as one message", {}};
  ar.add("ring traffic per GPU", fmt::format("{} sent, {} received", format_bytes(r.allreduce_bytes_sent_per_gpu),
                                             format_bytes(r.allreduce_bytes_sent_per_gpu)));
  if (s.world_size() > 1) {
    ar.add(fmt::format("ideal ring at {}", format_bandwidth(r.allreduce_busbw_GBps * 1e9)),
           format_seconds(r.allreduce_time_s));
    ar.add(fmt::format("NCCL model ({}/{})", r.nccl_algorithm, r.nccl_protocol),
           fmt::format("{} (busbw {})", format_seconds(r.nccl_time_s), format_bandwidth(r.nccl_busbw_GBps * 1e9)));
  } else {
    ar.add("time", "none: one GPU");
  }
  out.push_back(std::move(ar));
  if (s.parallelism.sharding != Sharding::none) out.push_back(sharded_comm_section(s, r));
  return out;
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
  const ParallelDims dims{s.world_size(), 1, 1, s.parallelism.hybrid ? s.parallelism.shard_group : 0};
  std::map<std::string, Sum> by_kind;
  for (const CommTiming& t : r.comm) {
    const std::string name = t.group == "data" ? t.kind : fmt::format("{} ({} group)", t.kind, t.group);
    Sum& k = by_kind[name];
    ++k.calls;
    k.bytes += t.bytes;
    k.seconds += t.end_s - t.start_s;
    const auto kind = collective_kind_named(t.kind);
    const auto group = group_kind_named(t.group);
    if (kind && group)
      k.moved += bytes_moved_per_rank(*kind, static_cast<int>(group_of(0, *group, dims).ranks.size()), t.bytes);
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
  st.add("  exposed communication", format_seconds(r.exposed_comm_s));
  st.add("  optimizer", format_seconds(r.optimizer_s));
  st.add("communication busy", format_seconds(r.comm_busy_s));
  st.add("without overlap", format_seconds(r.no_overlap_step_s));
  st.add("throughput", fmt::format("{:.1f} samples/s, {} tokens/s", r.samples_per_s, format_count(r.tokens_per_s)));
  st.add("scaling efficiency", fmt::format("{:.1f}% of linear vs 1 GPU", 100.0 * r.scaling_efficiency));
  return st;
}

Section advice_section(const StepResult& r) {
  Section a{"What limits this step", {}};
  for (size_t i = 0; i < r.advice.size(); ++i) a.add(fmt::format("{}.", i + 1), r.advice[i]);
  return a;
}

}  // namespace dpsim::app
