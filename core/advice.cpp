#include "dpsim/advice.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/terms.hpp"
#include "dpsim/conv_layout.hpp"
#include "dpsim/cost.hpp"
#include "dpsim/error.hpp"
#include "dpsim/estimate.hpp"
#include "dpsim/load.hpp"
#include "dpsim/plan.hpp"
#include "dpsim/topology.hpp"
#include "dpsim/units.hpp"

namespace dpsim {

namespace {

std::string gain(const StepResult& base, const StepResult& changed);

// `s` with every intra-node link twice as fast.
Scenario faster_intra_node(const Scenario& s) {
  Scenario faster = s;
  faster.topology.intra.gpu_link.bandwidth_bytes_per_s *= 2;
  for (auto& sw : faster.topology.intra.switches) sw.uplink.bandwidth_bytes_per_s *= 2;
  if (faster.topology.intra.inter_socket) faster.topology.intra.inter_socket->bandwidth_bytes_per_s *= 2;
  for (auto& l : faster.topology.intra.mesh) l.link.bandwidth_bytes_per_s *= 2;
  faster.topology.intra.host_staged_bytes_per_s *= 2;  // 0 (not measured) stays 0: the link's fraction, doubled
  return faster;
}

// Memory per GPU of `t`, from its plan alone (no simulation), with the plan, to evaluate `t` where it fits.
struct Planned {
  StepPlan plan;
  StepResult memory;
};

Planned plan_memory(const Scenario& t) {
  Planned p{make_step_plan(t), {}};
  fill_common(t, p.plan, p.memory);
  return p;
}

StepResult memory_of(const Scenario& t) { return plan_memory(t).memory; }

// `t` evaluated where it fits, else its memory alone.
StepResult evaluate_if_fits(const Scenario& t, const Evaluate& evaluate) {
  Planned p = plan_memory(t);
  return p.memory.fits ? evaluate(t, p.plan) : std::move(p.memory);
}

// `t` evaluated with a plan of its own.
StepResult evaluated(const Scenario& t, const Evaluate& evaluate) { return evaluate(t, make_step_plan(t)); }

Scenario zero3_over_all(const Scenario& s) {
  Scenario t = s;
  t.parallelism.sharding = Sharding::zero3;
  t.parallelism.sharding_as_written = to_string(Sharding::zero3);
  t.parallelism.hybrid = false;
  t.parallelism.shard_group = 0;
  t.zero_optimization.reset();
  return t;
}

// Whether the topology can be built at this size (a single-node topology without NICs cannot span nodes).
bool routable(const Topology& t) {
  try {
    check_topology(t);
    return true;
  } catch (const InputError&) {
    return false;
  }
}

// The smallest node count (doubling the cluster, up to 2^16 nodes) at which `t` fits; 0 if none does or the
// topology cannot grow past its nodes.
int nodes_to_fit(Scenario t) {
  for (int nodes = t.topology.nodes * 2; nodes <= (1 << 16); nodes *= 2) {
    t.topology.nodes = nodes;
    if (!routable(t.topology)) return 0;
    if (memory_of(t).fits) return nodes;
  }
  return 0;
}

// When no strategy fits: how far zero3 is from fitting, and what would make it fit, each computed.
std::string none_fits(const Scenario& s) {
  const Scenario z = zero3_over_all(s);
  const StepResult r3 = memory_of(z);
  std::string text = fmt::format(" None fits: zero3 is short by {} (activations alone {}).",
                                 format_bytes(r3.memory_need_bytes() - r3.gpu_memory_bytes),
                                 format_bytes(r3.activation_bytes_per_gpu));
  std::vector<Scenario> tries{z};
  if (s.model.transformer && s.training.activation_checkpointing != ActivationCheckpointing::full) {
    Scenario c = z;
    c.training.activation_checkpointing = ActivationCheckpointing::full;
    const StepResult rc = memory_of(c);
    text += fmt::format(" With training.activation_checkpointing: full, zero3 needs {} per GPU{}.",
                        format_bytes(rc.memory_need_bytes()), rc.fits ? " and fits" : "");
    if (rc.fits) return text;
    tries.push_back(std::move(c));
  }
  Scenario grown = s;
  grown.topology.nodes *= 2;
  if (!routable(grown.topology))
    return text + fmt::format(
                      " {} is one node with no NICs: more GPUs need a multi-node topology (e.g. h100-ib-cluster), or "
                      "use a smaller micro-batch or sequence, a larger parallelism.tensor, or parallelism.pipeline.",
                      s.topology.name);
  for (const Scenario& t : tries) {
    const int nodes = nodes_to_fit(t);
    if (nodes == 0) continue;
    text +=
        fmt::format(" zero3{} fits from {} nodes ({} GPUs).", &t == &tries.front() ? "" : " with full checkpointing",
                    nodes, nodes * t.topology.gpus_per_node);
    return text;
  }
  return text +
         " More GPUs do not help (the activations per GPU stay): use a smaller micro-batch or sequence, a larger "
         "parallelism.tensor (it splits the activations too), parallelism.pipeline (each stage holds its own "
         "layers' activations), or a GPU with more memory.";
}

// Each sharding strategy the scenario does not use, evaluated as the command evaluates the scenario itself; for an
// HSDP scenario, also its strategy with each larger shard group that divides the GPUs (doubling it), since a larger
// group is what holds less model state per GPU.
std::string sharding_alternatives(const Scenario& s, const StepResult& r, const Evaluate& evaluate) {
  struct Variant {
    std::string label, setting;  // how the advice names it, and the key that selects it
    Scenario scenario;
  };
  std::vector<Variant> variants;
  for (Sharding k : {Sharding::zero1, Sharding::zero2, Sharding::zero3}) {
    if (k == s.parallelism.sharding && !s.parallelism.hybrid) continue;  // HSDP's alternatives: sharding over all GPUs
    Scenario t = s;
    t.parallelism.sharding = k;
    t.parallelism.sharding_as_written = to_string(k);
    t.parallelism.hybrid = false;
    t.parallelism.shard_group = 0;
    if (k == Sharding::zero1) t.fsdp = Fsdp{};              // FSDP's knobs do not apply to zero1
    if (k == Sharding::zero3) t.zero_optimization.reset();  // DeepSpeed's stage 1/2 knobs do not apply to zero3
    if (t.parallelism.pipeline > 1 &&
        !sharding_modelled_with_pipeline(k, t.parallelism.hybrid, t.zero_optimization.has_value()))
      continue;  // the loader refuses it (check_sharding_with_pipeline)
    variants.push_back({to_string(k),
                        fmt::format("parallelism.sharding: {}{}", to_string(k),
                                    s.parallelism.hybrid ? ", without parallelism.shard_group" : ""),
                        std::move(t)});
  }
  if (s.parallelism.hybrid)
    for (int g = 2 * s.parallelism.shard_group; g < s.data_parallel(); g *= 2) {
      if (s.data_parallel() % g != 0) continue;
      Scenario t = s;
      t.parallelism.shard_group = g;
      variants.push_back({fmt::format("{} over {} GPUs", s.parallelism.sharding_as_written, g),
                          fmt::format("parallelism.shard_group: {}", g), std::move(t)});
    }
  std::string text;
  std::optional<std::pair<size_t, StepResult>> fastest;  // the fastest variant that fits
  for (size_t i = 0; i < variants.size(); ++i) {
    // Memory needs no simulation: a variant that does not fit is not evaluated (at a thousand GPUs, a simulated
    // HSDP variant whose shard group crosses nodes takes seconds).
    StepResult x = evaluate_if_fits(variants[i].scenario, evaluate);
    text += fmt::format(" {}: {} per GPU, {};", variants[i].label, format_bytes(x.memory_need_bytes()),
                        x.fits ? fmt::format("fits, step {} ({:.1f} samples/s, {})", format_seconds(x.step_time_s),
                                             x.samples_per_s, gain(r, x))
                               : "does not fit");
    if (x.fits && (!fastest || x.step_time_s < fastest->second.step_time_s)) fastest.emplace(i, std::move(x));
  }
  if (!text.empty()) text.back() = '.';
  if (fastest)
    text += fmt::format(" Fastest that fits: {} (set {}).", variants[fastest->first].label,
                        variants[fastest->first].setting);
  else
    text += none_fits(s);
  return text;
}

// A full fine-tune that does not fit: LoRA with PEFT's defaults (data/lora.yaml) on the same cluster, evaluated as the
// scenario is where it fits: its memory, step and all-reduce bytes per GPU next to the full fine-tune's.
// A variant's step where its memory fits; nothing otherwise (a variant that does not fit is not offered).
std::optional<StepResult> evaluated_if_fits(const Scenario& variant, const Evaluate& evaluate) {
  const Planned p = plan_memory(variant);
  if (!p.memory.fits) return std::nullopt;
  return evaluate(variant, p.plan);
}

std::string lora_alternative(const Scenario& s, const StepResult& r, const Evaluate& evaluate) {
  if (s.training.trainable != Trainable::all || !s.model.transformer) return "";
  if (s.parallelism.tensor > 1 || s.parallelism.pipeline > 1 || s.zero_optimization) return "";
  Scenario t = s;
  t.training.trainable = Trainable::lora;
  t.training.lora = default_lora(s.model);
  if (s.parallelism.sharding == Sharding::zero2 || s.parallelism.sharding == Sharding::zero3)
    t.training.lora.adapter_dtype = s.training.param_dtype;  // FSDP: one dtype per FlatParameter
  const auto fits = evaluated_if_fits(t, evaluate);
  if (!fits) return "";
  const StepResult& x = *fits;
  return fmt::format(
      " For a fine-tune, LoRA (training.trainable: lora, PEFT's defaults: rank {} on {}): {} trainable parameters, "
      "{} per GPU, fits, step {} ({}), all-reduce {} per GPU per step instead of {}.",
      t.training.lora.rank, fmt::join(t.training.lora.target_modules, ", "),
      format_count(static_cast<double>(x.trainable_parameters.value_or(0))), format_bytes(x.memory_need_bytes()),
      format_seconds(x.step_time_s), gain(r, x), format_bytes(x.allreduce_bytes_sent_per_gpu),
      format_bytes(r.allreduce_bytes_sent_per_gpu));
}

// Mixed precision's fp32 master copy and fp32 moments dropped (training.master_weights false): what pure 16-bit
// training, as torchtune's bf16 recipes run it, would hold, where that fits.
std::string pure_16bit_alternative(const Scenario& s, const StepResult& r, const Evaluate& evaluate) {
  if (!keeps_fp32_master(s.training.param_dtype, s.training.master_weights) || s.zero_optimization) return "";
  Scenario t = s;
  t.training.master_weights = false;
  const auto fits = evaluated_if_fits(t, evaluate);
  if (!fits) return "";
  const StepResult& x = *fits;
  return fmt::format(
      " Pure {} training (training.master_weights: false: the optimizer's moments in {}, no fp32 master copy, as "
      "torchtune's {} recipes train): model state {} per GPU, {} in all, fits, step {} ({}).",
      to_string(s.training.param_dtype), to_string(s.training.param_dtype), to_string(s.training.param_dtype),
      format_bytes(x.model_state_bytes_per_gpu), format_bytes(x.memory_need_bytes()), format_seconds(x.step_time_s),
      gain(r, x));
}

// Context parallelism where the activations are what does not fit: the smallest larger degree (doubling) that the
// scenario can run (context_rule) and that fits, with its step.
std::string context_alternative(const Scenario& s, const StepResult& r, const Evaluate& evaluate) {
  if (!s.model.transformer || r.activation_bytes_per_gpu < r.model_state_bytes_per_gpu) return "";
  for (int c = 2 * s.parallelism.context; c <= s.world_size(); c *= 2) {
    if (context_rule(s, c) != ContextRule::ok) continue;
    Scenario t = s;
    t.parallelism.context = c;
    const auto fits = evaluated_if_fits(t, evaluate);
    if (!fits) continue;
    const StepResult& x = *fits;
    return fmt::format(
        " Context parallelism (parallelism.context: {}, data {}: each GPU holds 1/{} of every sequence, {} tokens): "
        "activations {} per GPU, {} in all, fits, step {} ({}).",
        c, t.data_parallel(), c, s.training.sequence_length / c, format_bytes(x.activation_bytes_per_gpu),
        format_bytes(x.memory_need_bytes()), format_seconds(x.step_time_s), gain(r, x));
  }
  return "";
}

std::string memory_advice(const Scenario& s, const StepResult& r, const Evaluate& evaluate) {
  const double need = r.memory_need_bytes();
  std::string text = fmt::format(
      "Does not fit: needs {} per GPU (model state {}, activations {}{}, DDP buckets {}{}, CUDA and NCCL {}), "
      "the {} has {}.",
      format_bytes(need), format_bytes(r.model_state_bytes_per_gpu), format_bytes(r.activation_bytes_per_gpu),
      r.weight_copy_bytes_per_gpu > 0 ? ", autocast weight copies " + format_bytes(r.weight_copy_bytes_per_gpu) : "",
      format_bytes(r.ddp_buffer_bytes_per_gpu),
      r.unsharded_bytes_per_gpu > 0 ? fmt::format(", {} {}", unsharded_memory_label(s.parallelism.pipeline),
                                                  format_bytes(r.unsharded_bytes_per_gpu))
                                    : "",
      format_bytes(r.runtime_bytes_per_gpu()), s.topology.gpu.name, format_bytes(r.gpu_memory_bytes));
  if (s.training.autocast() && s.data_group_gpus() > 1) {
    // Sharding and LoRA are modelled with their own mixed precision, not autocast (load_scenario.cpp check_autocast).
    text += fmt::format(
        " Sharding and LoRA are modelled with their own mixed precision, not autocast: set training.param_dtype {} "
        "(without compute_dtype) to see them.",
        to_string(s.training.compute()));
  } else if (s.data_group_gpus() > 1) {
    text += " Sharded over the " + std::to_string(s.data_group_gpus()) + " data-parallel GPUs:";
    text += sharding_alternatives(s, r, evaluate);
  }
  if (r.ddp_buffer_bytes_per_gpu > 0 && need - r.ddp_buffer_bytes_per_gpu <= r.gpu_memory_bytes) {
    text += " ddp.gradient_as_bucket_view: true alone would make it fit.";
  }
  text += context_alternative(s, r, evaluate);
  return s.training.autocast() ? text
                               : text + lora_alternative(s, r, evaluate) + pure_16bit_alternative(s, r, evaluate);
}

std::string gain(const StepResult& base, const StepResult& changed) {
  const double g = changed.samples_per_s / base.samples_per_s - 1.0;
  return fmt::format("{:+.1f}% throughput ({:.1f} -> {:.1f} samples/s)", 100.0 * g, base.samples_per_s,
                     changed.samples_per_s);
}

// The ring's bottleneck and how busy the step keeps it.
std::string bottleneck(const Scenario& s, const StepResult& r) {
  const FabricSummary f = summarize_fabric(s.topology);
  const double busy = r.comm_busy_s > 0 ? r.comm_busy_s : r.allreduce_time_s;
  // A node whose ring runs through host memory (NCCL's SHM): the host's staged copy rate, where the network is not
  // slower still (compared at what each reaches)
  if (intra_shm_bound(f, s.nccl) &&
      (f.nodes == 1 || algorithms::intra_ring_busbw(f, s.nccl) < algorithms::inter_ring_busbw(f, s.nccl)))
    return fmt::format(
        "the host-memory staging of NCCL's SHM transport (no PCIe peer-to-peer on {} of the node ring's {} hops; {} "
        "per direction, {}) is the bottleneck, busy {:.0f}% of the step",
        f.intra_shm_edges, f.intra_ring_edges, format_bandwidth(host_staged_rate(f, s.nccl)), host_staged_source(f),
        100.0 * busy / r.step_time_s);
  const bool net = f.nodes > 1 && f.inter_ring_bytes_per_s < f.intra_ring_bytes_per_s;
  const double bw = f.ring_bytes_per_s();
  const std::string link = !net ? std::string(f.intra_class) + " link"
                           : f.uplink_bound()
                               ? fmt::format("{:g}:1 oversubscribed {} uplink", s.topology.network.oversubscription,
                                             s.topology.network.kind == NetworkKind::fat_tree ? "leaf" : "rail")
                               : std::string("inter-node network (a node's NICs x its slowest NIC)");
  return fmt::format("the {} ({} per direction) is the bottleneck, busy {:.0f}% of the step", link,
                     format_bandwidth(bw), 100.0 * busy / r.step_time_s);
}

// estimate's figures are its lower bound: say so, with the other end of the bracket.
std::string bound_note(const StepResult& r) {
  if (!r.bounds) return "";
  const StepBound& none = r.bounds->no_overlap;
  return fmt::format(" ({}; with no overlap: exposed communication {:.1f}%, scaling efficiency {:.1f}%)",
                     lower_bound_label(r), 100.0 * none.exposed_comm_s / none.step_time_s,
                     100.0 * none.scaling_efficiency);
}

std::string mention_gain(const Scenario& variant, const StepResult& r, const Evaluate& evaluate,
                         const std::string& sentence);

// Plain DDP across 2 or 3 nodes with NCCL's own choice: NCCL prices the tree at the ring's network bandwidth x 0.92
// (tuning.cc), but its double binary tree sends S (2 nodes) or 1.5 S (3 nodes) per node where the ring sends
// 2(n-1)/n S, so a forced tree can beat the ring NCCL runs (nccl#1801: 1.19-1.23x on 3 GB200 partitions). What
// NCCL_ALGO=Tree gives, where it is worth mentioning.
std::string forced_tree_advice(const Scenario& s, const StepResult& r, const Evaluate& evaluate) {
  const Parallelism& p = s.parallelism;
  if (s.collective.algorithm != Algorithm::automatic || s.topology.nodes < 2 || s.topology.nodes > 3 ||
      p.sharding != Sharding::none || p.tensor > 1 || p.pipeline > 1 || s.zero_optimization)
    return "";
  Scenario tree = s;
  tree.collective.algorithm = Algorithm::tree;
  return mention_gain(tree, r, evaluate,
                      fmt::format("NCCL's own model prices its tree at the ring's network bandwidth, but on {} nodes "
                                  "the double binary tree sends {:g} S per node where the ring sends {:.2f} S: "
                                  "NCCL_ALGO=Tree (collective.algorithm: tree) gives {{}}.",
                                  s.topology.nodes, algorithms::tree_node_network_bytes(s.topology.nodes),
                                  ring_bytes_sent_per_gpu(1.0, s.world_size())));
}

// A PCIe node whose ring runs some hops through host memory (NCCL's SHM): what peer-to-peer on every path gives.
std::string p2p_advice(const Scenario& s, const StepResult& r, const Evaluate& evaluate) {
  const FabricSummary f = summarize_fabric(s.topology);
  if (f.intra_shm_edges == 0) return "";
  const IntraNode& intra = s.topology.intra;
  const std::string why = intra.p2p == PcieP2p::disabled ? "intra_node.p2p: disabled, NCCL_P2P_DISABLE=1"
                          : !s.topology.gpu.pcie_p2p     ? "the " + s.topology.gpu.name + "'s driver allows no P2P"
                                                         : "NCCL's default runs P2P only within a PCIe switch";
  Scenario p2p = s;
  p2p.topology.intra.p2p = PcieP2p::all_paths;
  return mention_gain(
      p2p, r, evaluate,
      fmt::format("NCCL stages {} of the node ring's {} hops through host memory ({}). Peer-to-peer on every path "
                  "({}; intra_node.p2p: all_paths) gives {{}}; measure both: through a CPU, published all-reduces "
                  "gained (4x RTX 4090, NVIDIA/nccl#1603: 18 -> 22 GB/s busbw) or lost (8x A40, nccl-tests#74).",
                  f.intra_shm_edges, f.intra_ring_edges, why,
                  s.topology.gpu.pcie_p2p ? "NCCL_P2P_LEVEL=SYS" : "a driver that allows it on these cards"));
}

std::vector<std::string> comm_advice(const Scenario& s, const StepResult& r, const Evaluate& evaluate) {
  std::vector<std::string> out;
  out.push_back(fmt::format("Communication-bound: exposed communication is {:.0f}% of the step ({}){}; {}.",
                            100.0 * r.exposed_comm_s / r.step_time_s, format_seconds(r.exposed_comm_s), bound_note(r),
                            bottleneck(s, r)));
  Scenario bigger_batch = s;
  bigger_batch.training.micro_batch *= 2;
  const StepResult b = evaluated(bigger_batch, evaluate);
  out.push_back(fmt::format("Micro-batch {} -> {}: {}{}.", s.training.micro_batch, bigger_batch.training.micro_batch,
                            gain(r, b), b.fits ? "" : " (but it no longer fits in memory)"));
  if (s.zero_optimization) {  // DeepSpeed's buckets: reduce_bucket_size elements
    Scenario other = s;
    const bool overlap = s.zero_optimization->overlap_comm;
    other.zero_optimization->overlap_comm = !overlap;
    out.push_back(fmt::format("zero_optimization.overlap_comm {} -> {}: {}.", overlap, !overlap,
                              gain(r, evaluated(other, evaluate))));
  } else if (!s.ddp.overlap_grad_reduce) {  // DDP buckets reduced after the backward (Megatron's local DDP)
    Scenario overlapped = s;
    overlapped.ddp = Ddp{};  // PyTorch DDP's hooks and buckets
    out.push_back(
        fmt::format("ddp.overlap_grad_reduce false -> true (the buckets reduced during the backward, PyTorch DDP's {} "
                    "buckets): {}.",
                    format_bytes(overlapped.ddp.bucket_cap_bytes), gain(r, evaluated(overlapped, evaluate))));
  } else if (!r.buckets.empty()) {  // DDP and zero1 reduce in DDP's buckets; FSDP per unit
    Scenario bigger_buckets = s;
    bigger_buckets.ddp.bucket_cap_bytes *= 4;
    out.push_back(fmt::format("Bucket cap {} -> {}: {}.", format_bytes(s.ddp.bucket_cap_bytes),
                              format_bytes(bigger_buckets.ddp.bucket_cap_bytes),
                              gain(r, evaluated(bigger_buckets, evaluate))));
  }
  const std::string tree = forced_tree_advice(s, r, evaluate);
  if (!tree.empty()) out.push_back(tree);
  const std::string p2p = p2p_advice(s, r, evaluate);
  if (!p2p.empty()) out.push_back(p2p);
  Scenario faster = s;
  std::string what;
  if (s.topology.nodes > 1) {
    for (auto& nic : faster.topology.nics) nic.link.bandwidth_bytes_per_s *= 2;
    what = "NICs twice as fast";
  } else {
    faster = faster_intra_node(s);
    what = "an intra-node fabric twice as fast";
  }
  out.push_back(fmt::format("With {}: {}.", what, gain(r, evaluated(faster, evaluate))));
  return out;
}

// Each smaller tensor-parallel degree (a divisor of the scenario's, so Megatron's even split still holds), with the
// data-parallel degree that keeps the world: its memory, and where it fits its step, evaluated as the scenario is.
std::string smaller_tensor_degrees(const Scenario& s, const StepResult& r, const Evaluate& evaluate) {
  std::string text;
  std::optional<std::pair<int, StepResult>> fastest;  // the highest throughput that fits, above the scenario's
  for (int t = s.parallelism.tensor - 1; t >= 1; --t) {
    if (s.parallelism.tensor % t != 0) continue;
    Scenario v = s;
    v.parallelism.tensor = t;
    v.parallelism.sequence_parallel = t > 1 && s.parallelism.sequence_parallel;
    if (v.parallelism.hybrid && v.data_parallel() % v.parallelism.shard_group != 0) continue;
    StepResult x = evaluate_if_fits(v, evaluate);
    text += fmt::format(
        " parallelism.tensor {} (data {}): {} per GPU, {};", t, v.data_parallel(), format_bytes(x.memory_need_bytes()),
        x.fits ? fmt::format("fits, step {}, {}", format_seconds(x.step_time_s), gain(r, x)) : "does not fit");
    // The data-parallel degree changes the samples per step: compare throughput, not step time.
    if (x.fits && x.samples_per_s > r.samples_per_s && (!fastest || x.samples_per_s > fastest->second.samples_per_s))
      fastest.emplace(t, std::move(x));
  }
  if (text.empty()) return text;
  text.back() = '.';
  if (fastest)
    text += fmt::format(" Fastest that fits: parallelism.tensor: {}.", fastest->first);
  else
    text += fmt::format(" No smaller degree fits with more throughput: tensor {} stays.", s.parallelism.tensor);
  return text;
}

// Tensor parallelism's collectives run on the compute stream (Megatron-LM's f and g): none of them is hidden, unless
// Megatron-Core runs the column-parallel linears' backward ones beside their GEMMs or Transformer Engine overlaps
// every sequence-parallel one (parallelism.tp_comm_overlap backward, userbuffers).
std::string tensor_comm_exposure(TpCommOverlap overlap) {
  switch (overlap) {
    case TpCommOverlap::backward:
      return "what Megatron-Core's asynchronous backward calls leave exposed beside their GEMMs, and the rest on the "
             "compute stream";
    case TpCommOverlap::userbuffers:
      return "what Transformer Engine's overlap with the GEMMs beside them leaves exposed";
    case TpCommOverlap::none: break;
  }
  return "on the compute stream, so none is hidden";
}

std::vector<std::string> tensor_comm_advice(const Scenario& s, const StepResult& r, const Evaluate& evaluate) {
  std::vector<std::string> out;
  out.push_back(fmt::format(
      "Tensor-communication-bound: the tensor-parallel collectives of the {}-GPU groups are {:.0f}% of the step "
      "({}), {}.{}",
      s.parallelism.tensor, 100.0 * r.tensor_comm_s / r.step_time_s, format_seconds(r.tensor_comm_s),
      tensor_comm_exposure(s.parallelism.tp_comm_overlap), smaller_tensor_degrees(s, r, evaluate)));
  const auto with_overlap = [&](TpCommOverlap overlap) {
    Scenario o = s;
    o.parallelism.tp_comm_overlap = overlap;
    return gain(r, evaluated(o, evaluate));
  };
  // Megatron-Core's and Transformer Engine's overlaps; PyTorch's tensor parallelism has neither
  // (parallelism.tensor_impl)
  const bool megatron = s.parallelism.tensor_impl == TensorImpl::megatron;
  if (megatron && s.parallelism.tp_comm_overlap == TpCommOverlap::none)
    out.push_back(fmt::format(
        "parallelism.tp_comm_overlap: backward (Megatron-Core's column-parallel linears, which run their backward "
        "collectives as asynchronous NCCL calls beside their GEMMs) hides part of them: {}.",
        with_overlap(TpCommOverlap::backward)));
  if (megatron && s.parallelism.sequence_parallel && s.parallelism.tp_comm_overlap != TpCommOverlap::userbuffers)
    out.push_back(fmt::format(
        "parallelism.tp_comm_overlap: userbuffers (Transformer Engine's, Megatron-Core's --tp-comm-overlap) runs "
        "the sequence-parallel all-gathers and reduce-scatters beside the linear layers' GEMMs: {}.",
        with_overlap(TpCommOverlap::userbuffers)));
  if (!s.parallelism.sequence_parallel) {
    Scenario sp = s;
    sp.parallelism.sequence_parallel = true;
    const Planned p = plan_memory(sp);
    const double activations = p.memory.activation_bytes_per_gpu;
    const StepResult x = evaluate(sp, p.plan);
    out.push_back(fmt::format(
        "parallelism.sequence_parallel: true does not cut these bytes (each all-reduce becomes a reduce-scatter and "
        "an all-gather of the same buffer); it cuts the activations per GPU from {} to {}; evaluated: {}.",
        format_bytes(r.activation_bytes_per_gpu), format_bytes(activations), gain(r, x)));
  }
  out.push_back(fmt::format("With an intra-node fabric twice as fast (the tensor groups' link): {}.",
                            gain(r, evaluated(faster_intra_node(s), evaluate))));
  return out;
}

// AWS EFA: the model's EFA efficiency is fitted on the 8 GiB plateau; on the one published multi-node EFA sweep (p5,
// 4-32 nodes, validation/reference-errors.md) the ring sizes of aws-ofi-nccl's tuner come within 13%, its tree/LL128
// and 32-node NVLSTree sizes ran up to 2x slower than predicted: say what half the EFA bandwidth would do.
std::string efa_advice(const Scenario& s, const StepResult& r, const Evaluate& evaluate) {
  const char* net = s.topology.network.ring_class();
  Scenario slower = s;
  slower.nccl.set_ring_efficiency(net, s.nccl.ring_efficiency_for(net, s.topology.gpu.arch) / 2);
  return fmt::format(
      "EFA: on the one published p5 sweep (4-32 instances, 32 MiB-8 GiB) the ring's calls came within 13% of "
      "dpsim, but where aws-ofi-nccl's tuner runs the tree with LL128 (32-256 MiB) or NVLSTree (0.5-1 GiB on 32 "
      "instances) they ran up to 2x slower than predicted (smaller sizes unmeasured). With half the EFA bandwidth: {}.",
      gain(r, evaluated(slower, evaluate)));
}

// What a variant of the scenario gains over `r` (gain()), evaluated, where it is at least kWorthMentioningGain;
// nothing otherwise.
std::optional<std::string> worth_mentioning(const Scenario& variant, const StepResult& r, const Evaluate& evaluate) {
  const StepResult f = evaluated(variant, evaluate);
  if (!(f.samples_per_s > (1.0 + kWorthMentioningGain) * r.samples_per_s)) return std::nullopt;
  return gain(r, f);
}

// `sentence` with its one {} the gain of `variant`, where that is worth mentioning; "" otherwise.
std::string mention_gain(const Scenario& variant, const StepResult& r, const Evaluate& evaluate,
                         const std::string& sentence) {
  const auto g = worth_mentioning(variant, r, evaluate);
  return g ? fmt::format(fmt::runtime(sentence), *g) : std::string();
}

// A transformer on eager kernels (training.elementwise eager): what one fused kernel per memory-bound op gives. The
// Llama family's ops are unfused chains; the other families' are PyTorch's own LayerNorm and GELU kernels.
std::string fused_elementwise_advice(const Scenario& s, const StepResult& r, const Evaluate& evaluate) {
  if (!s.model.transformer || s.training.elementwise != ElementwiseImpl::eager) return "";
  Scenario fused = s;
  fused.training.elementwise = ElementwiseImpl::fused;
  const auto gained = worth_mentioning(fused, r, evaluate);
  if (!gained) return "";
  if (s.model.transformer->family != ModelFamily::llama)
    return fmt::format(
        "Eager elementwise kernels (training.elementwise: eager; PyTorch's own LayerNorm and GELU as Hugging Face and "
        "llm-foundry run them, measured at 0.3-0.7 of the copy rate): fused ones (apex's FusedLayerNorm and a fused "
        "bias-GELU, as Megatron-LM runs them, or torch.compile; training.elementwise: fused) give {}.",
        *gained);
  return fmt::format(
      "Eager elementwise kernels (training.elementwise: eager, as torchtitan and Hugging Face run them: RMSNorm "
      "through fp32, the rotary embedding, SwiGLU, the key/value copies): one fused kernel per op (torch.compile, or "
      "Transformer Engine's as Megatron-LM runs them; training.elementwise: fused) gives {}.",
      *gained);
}

// Convolutions on tensor cores in channels_first (NCHW, PyTorch's default): cuDNN runs each call on transposed NHWC
// copies (core/conv_layout.cpp); what channels_last gives.
std::string channels_last_advice(const Scenario& s, const StepResult& r, const Evaluate& evaluate) {
  if (!transposes_convolutions(s.training)) return "";
  bool convolutions = false;
  for (const ExplicitLayer& l : s.model.layers) convolutions = convolutions || l.convolution;
  if (!convolutions) return "";
  Scenario last = s;
  last.training.memory_format = MemoryFormat::channels_last;
  return mention_gain(last, r, evaluate,
                      "Convolutions in channels_first (NCHW, PyTorch's default) on tensor cores: cuDNN transposes "
                      "every call's feature maps to NHWC and back. channels_last (model.to(memory_format="
                      "torch.channels_last) and the same for each input; training.memory_format: channels_last) "
                      "gives {}.");
}

// A SHARP network whose CollNet the scenario leaves off (NCCL_COLLNET_ENABLE unset): what NCCL's choice gives when it
// also weighs CollNetChain.
std::string collnet_advice(const Scenario& s, const StepResult& r, const Evaluate& evaluate) {
  if (!s.topology.network.sharp || s.collective.collnet || s.collective.algorithm != Algorithm::automatic ||
      s.topology.nodes < 2)
    return "";
  Scenario with = s;
  with.collective.collnet = true;
  return mention_gain(with, r, evaluate,
                      "The network reduces in its switches (SHARP) but NCCL does not use it unless asked: "
                      "NCCL_COLLNET_ENABLE=1 with the SHARP plugin (collective.collnet: true, NCCL's CollNetChain "
                      "where it is faster) gives {}.");
}

}  // namespace

const char* lower_bound_label(const StepResult& r) {
  return r.sharding == "none" ? "perfect-overlap bound" : "in the program's order, no contention";
}

std::vector<std::string> advise(const Scenario& s, const StepResult& r, const Evaluate& evaluate) {
  std::vector<std::string> out;
  if (!r.fits) out.push_back(memory_advice(s, r, evaluate));
  if (r.step_time_s <= 0) return out;
  const bool comm_bound = s.world_size() > 1 && r.exposed_comm_s > kCommBoundShare * r.step_time_s;
  const bool tensor_bound = r.tensor_comm_s > kCommBoundShare * r.step_time_s;
  if (comm_bound) {
    const auto more = comm_advice(s, r, evaluate);
    out.insert(out.end(), more.begin(), more.end());
  }
  if (tensor_bound) {
    const auto more = tensor_comm_advice(s, r, evaluate);
    out.insert(out.end(), more.begin(), more.end());
  }
  if (!comm_bound && !tensor_bound) {
    out.push_back(fmt::format(
        "Compute-bound: forward {} + backward {} are {:.0f}% of the step; exposed communication {:.1f}%{}; scaling "
        "efficiency {:.1f}%{}.",
        format_seconds(r.forward_s), format_seconds(r.backward_s), 100.0 * (r.forward_s + r.backward_s) / r.step_time_s,
        100.0 * r.exposed_comm_s / r.step_time_s,
        s.parallelism.tensor > 1
            ? fmt::format("; tensor-parallel communication {:.1f}%", 100.0 * r.tensor_comm_s / r.step_time_s)
            : "",
        100.0 * r.scaling_efficiency, bound_note(r)));
  }
  if (s.topology.nodes > 1 && s.topology.network.transport == NetTransport::efa)
    out.push_back(efa_advice(s, r, evaluate));
  if (r.fits) {
    const std::string fused = fused_elementwise_advice(s, r, evaluate);
    if (!fused.empty()) out.push_back(fused);
    const std::string layout = channels_last_advice(s, r, evaluate);
    if (!layout.empty()) out.push_back(layout);
    const std::string collnet = collnet_advice(s, r, evaluate);
    if (!collnet.empty()) out.push_back(collnet);
  }
  if (!r.buckets.empty()) {
    const auto& last = r.buckets.back();
    if (last.end_s - last.start_s > 0.5 * r.exposed_comm_s && r.exposed_comm_s > 0) {
      out.push_back(fmt::format("The last bucket ({}) starts when backward ends and takes {}: the exposed tail.",
                                format_bytes(static_cast<double>(last.bytes)),
                                format_seconds(last.end_s - last.start_s)));
    }
  }
  return out;
}

}  // namespace dpsim
