#include "dpsim/scenario.hpp"

#include <cmath>

#include <fmt/format.h>

#include "dpsim/error.hpp"

namespace dpsim {

int dtype_bytes(Dtype dtype) { return dtype == Dtype::fp32 ? 4 : 2; }

const char* to_string(Dtype dtype) {
  switch (dtype) {
    case Dtype::bf16: return "bf16";
    case Dtype::fp16: return "fp16";
    case Dtype::fp32: return "fp32";
  }
  return "?";
}

const char* to_string(Optimizer optimizer) {
  switch (optimizer) {
    case Optimizer::adamw: return "adamw";
    case Optimizer::sgd_momentum: return "sgd_momentum";
    case Optimizer::sgd: return "sgd";
  }
  return "?";
}

const char* to_string(OptimizerImpl impl) {
  switch (impl) {
    case OptimizerImpl::foreach: return "foreach";
    case OptimizerImpl::fused: return "fused";
    case OptimizerImpl::forloop: return "forloop";
  }
  return "?";
}

const char* to_string(AttentionImpl impl) {
  switch (impl) {
    case AttentionImpl::flash: return "flash";
    case AttentionImpl::flash1: return "flash1";
    case AttentionImpl::cudnn: return "cudnn";
    case AttentionImpl::eager: return "eager";
    case AttentionImpl::eager_16bit: return "eager_16bit";
  }
  return "?";
}

bool is_eager(AttentionImpl impl) { return impl == AttentionImpl::eager || impl == AttentionImpl::eager_16bit; }
const char* to_string(ActivationCheckpointing c) {
  switch (c) {
    case ActivationCheckpointing::none: return "none";
    case ActivationCheckpointing::selective: return "selective";
    case ActivationCheckpointing::full: return "full";
    case ActivationCheckpointing::selective_op: return "selective_op";
  }
  return "?";
}

const char* to_string(ElementwiseImpl impl) { return impl == ElementwiseImpl::eager ? "eager" : "fused"; }
const char* to_string(MemoryFormat format) {
  return format == MemoryFormat::channels_first ? "channels_first" : "channels_last";
}

// training.cross_entropy, or by default what the parallelism implies: with tensor parallelism dpsim's model is
// Megatron-LM's, whose loss is the vocab-parallel cross-entropy (fused); without it, PyTorch's own (torch).
CrossEntropyImpl cross_entropy_impl(const Scenario& s) {
  if (s.training.cross_entropy) return *s.training.cross_entropy;
  return s.parallelism.tensor > 1 ? CrossEntropyImpl::fused : CrossEntropyImpl::torch;
}

const char* to_string(Trainable trainable) {
  switch (trainable) {
    case Trainable::all: return "all";
    case Trainable::lora: return "lora";
    case Trainable::frozen_except: return "frozen_except";
  }
  return "?";
}

// to_string(Algorithm) and algorithm_named: the algorithm registry (collective_algorithms.cpp).

const char* to_string(Protocol protocol) {
  switch (protocol) {
    case Protocol::automatic: return "auto";
    case Protocol::ll: return "ll";
    case Protocol::ll128: return "ll128";
    case Protocol::simple: return "simple";
  }
  return "?";
}

const char* to_string(Arch arch) {
  switch (arch) {
    case Arch::volta: return "volta";
    case Arch::turing: return "turing";
    case Arch::ampere: return "ampere";
    case Arch::ada: return "ada";
    case Arch::hopper: return "hopper";
    case Arch::blackwell: return "blackwell";
  }
  return "?";
}

const char* to_string(CpuVendor vendor) {
  switch (vendor) {
    case CpuVendor::intel: return "intel";
    case CpuVendor::amd: return "amd";
    case CpuVendor::arm: return "arm";
  }
  return "?";
}

CpuVendor nccl_table_vendor(CpuVendor vendor) { return vendor == CpuVendor::amd ? CpuVendor::amd : CpuVendor::intel; }

std::optional<Arch> arch_named(std::string_view name) {
  for (Arch a : kArchs)
    if (name == to_string(a)) return a;
  return std::nullopt;
}

const char* to_string(PcieP2p p2p) {
  switch (p2p) {
    case PcieP2p::nccl_default: return "nccl_default";
    case PcieP2p::all_paths: return "all_paths";
    case PcieP2p::disabled: return "disabled";
  }
  return "?";
}

const char* to_string(IntraKind kind) {
  switch (kind) {
    case IntraKind::nvswitch: return "nvswitch";
    case IntraKind::pcie: return "pcie";
    case IntraKind::nvlink_mesh: return "nvlink_mesh";
  }
  return "?";
}

const char* to_string(NetworkKind kind) {
  switch (kind) {
    case NetworkKind::none: return "none";
    case NetworkKind::single_switch: return "single_switch";
    case NetworkKind::fat_tree: return "fat_tree";
    case NetworkKind::rail_optimized: return "rail_optimized";
  }
  return "?";
}

const char* to_string(NetTransport transport) {
  switch (transport) {
    case NetTransport::infiniband: return "infiniband";
    case NetTransport::efa: return "efa";
  }
  return "?";
}

const char* to_string(Fabric fabric) {
  switch (fabric) {
    case Fabric::nvlink: return "nvlink";
    case Fabric::pcie: return "pcie";
    case Fabric::net: return "net";
  }
  return "?";
}

double GpuSpec::peak_flops_per_s(Dtype dtype) const {
  const double peak = dtype == Dtype::bf16   ? peak_bf16_flops_per_s
                      : dtype == Dtype::fp16 ? peak_fp16_flops_per_s
                                             : peak_fp32_flops_per_s;
  if (peak <= 0)
    throw InputError(name + " has no " + to_string(dtype) + " peak rate in data/gpus/" + key + ".yaml (not supported)");
  return peak;
}

Topology keep_first_gpus(Topology t, int gpus_per_node) {
  const bool fewer = gpus_per_node < t.gpus_per_node;
  t.gpus_per_node = gpus_per_node;
  if (!fewer) return t;
  auto keep = [&](std::vector<int>& g) { std::erase_if(g, [&](int x) { return x >= gpus_per_node; }); };
  for (auto& nic : t.nics) keep(nic.gpus);
  std::erase_if(t.nics, [](const Nic& n) { return n.gpus.empty(); });
  for (auto& sw : t.intra.switches) keep(sw.gpus);
  std::erase_if(t.intra.switches, [](const PcieSwitch& s) { return s.gpus.empty(); });
  std::erase_if(t.intra.mesh, [&](const MeshLink& l) { return l.gpu_a >= gpus_per_node || l.gpu_b >= gpus_per_node; });
  return t;
}

double PipelineFill::seconds(double message_bytes) const {
  if (bytes <= 0 || message_bytes <= 0) return 0.0;
  return bytes / bytes_per_s * -std::expm1(-message_bytes / bytes);
}

PipelineFill PipelineFill::for_loop(int channels, int heads) const {
  if (loop_channels <= 0 || loop_heads <= 0 || channels <= 0 || heads <= 0) return *this;
  PipelineFill f = *this;
  const int h = max_heads > 0 ? std::min(heads, max_heads) : heads;
  f.bytes *= static_cast<double>(channels) * h / (static_cast<double>(loop_channels) * loop_heads);
  return f;
}

double NcclModel::ring_plateau_factor(Arch arch) const {
  const auto it = ring_simple_plateau_latency_factor.find(arch);
  return it == ring_simple_plateau_latency_factor.end() ? 1.0 : it->second;
}

double NcclModel::ring_efficiency_for(const std::string& fabric_class, Arch arch) const {
  if (const auto a = ring_efficiency_by_arch.find(arch); a != ring_efficiency_by_arch.end()) {
    if (const auto e = a->second.find(fabric_class); e != a->second.end()) return e->second;
  }
  const auto it = ring_efficiency.find(fabric_class);
  if (it == ring_efficiency.end())
    throw InputError(fmt::format("{}: ring_efficiency.{}: missing (a topology uses that fabric class)",
                                 file.empty() ? std::string("data/nccl.yaml") : file, fabric_class));
  return it->second;
}

std::optional<ProtoValues> NcclModel::hw_latency(Fabric fabric, Algorithm algorithm, Arch arch) const {
  const auto hw = hw_latency_s.find(fabric);
  if (hw == hw_latency_s.end()) return std::nullopt;
  const auto a = hw->second.find(algorithm);
  if (a == hw->second.end()) return std::nullopt;
  ProtoValues v = a->second;
  for (Protocol p : {Protocol::ll, Protocol::ll128, Protocol::simple}) {
    if (const auto x = hw_latency_by_arch_s.find({arch, fabric, algorithm, p}); x != hw_latency_by_arch_s.end())
      v.at(p) = x->second;
  }
  return v;
}

void NcclModel::set_hw_latency(Fabric fabric, Algorithm algorithm, Protocol protocol, double seconds) {
  hw_latency_s[fabric][algorithm].at(protocol) = seconds;
  std::erase_if(hw_latency_by_arch_s, [&](const auto& entry) {
    const auto& [arch, f, a, p] = entry.first;
    return f == fabric && a == algorithm && p == protocol;
  });
}

double NcclModel::net_plugin_latency(const std::string& net_class) const {
  const auto it = net_plugin_latency_s.find(net_class);
  return it == net_plugin_latency_s.end() ? 0.0 : it->second;
}

double NcclModel::nvls_efficiency_vs_hopper(Arch arch) const {
  const auto it = nvls_efficiency.find(arch), hopper = nvls_efficiency.find(Arch::hopper);
  return it == nvls_efficiency.end() || hopper == nvls_efficiency.end() ? 1.0 : it->second / hopper->second;
}

int NcclStepChunks::nvls_channels_for(Arch arch, bool several_nodes) const {
  const auto it = nvls_channels.find(arch);
  return it == nvls_channels.end() ? 1 : it->second[several_nodes ? 1 : 0];
}

double NcclModel::net_overhead(CpuVendor vendor) const {
  const auto it = net_overhead_s.find(nccl_table_vendor(vendor));
  return it == net_overhead_s.end() ? 0.0 : it->second;
}

void NcclModel::set_ring_efficiency(const std::string& fabric_class, double efficiency) {
  ring_efficiency[fabric_class] = efficiency;
  for (auto& [arch, by_class] : ring_efficiency_by_arch) by_class.erase(fabric_class);
}

double ProtoValues::get(Protocol protocol) const {
  switch (protocol) {
    case Protocol::ll: return ll;
    case Protocol::ll128: return ll128;
    default: return simple;
  }
}

double& ProtoValues::at(Protocol protocol) {
  switch (protocol) {
    case Protocol::ll: return ll;
    case Protocol::ll128: return ll128;
    default: return simple;
  }
}

const char* to_string(Sharding sharding) {
  switch (sharding) {
    case Sharding::none: return "none";
    case Sharding::zero1: return "zero1";
    case Sharding::zero2: return "zero2";
    case Sharding::zero3: return "zero3";
  }
  return "?";
}

const char* to_string(TpCommOverlap overlap) {
  switch (overlap) {
    case TpCommOverlap::none: return "none";
    case TpCommOverlap::backward: return "backward";
    case TpCommOverlap::userbuffers: return "userbuffers";
  }
  return "?";
}

const char* to_string(TensorImpl impl) {
  switch (impl) {
    case TensorImpl::megatron: return "megatron";
    case TensorImpl::torch: return "torch";
  }
  return "?";
}

const char* to_string(BackwardPrefetch prefetch) {
  switch (prefetch) {
    case BackwardPrefetch::backward_pre: return "backward_pre";
    case BackwardPrefetch::backward_post: return "backward_post";
    case BackwardPrefetch::none: return "none";
  }
  return "?";
}

bool sharding_modelled_with_pipeline(Sharding sharding, bool hybrid, bool deepspeed) {
  if (sharding == Sharding::none) return true;
  return !deepspeed && !hybrid && (sharding == Sharding::zero1 || sharding == Sharding::zero3);
}

// Megatron-LM's rules for context parallelism: a transformer's attention; the world divisible by tensor x context x
// pipeline (arguments.py at d98e8a6, "world size ... is not divisible by total_model_size"); the sequence split into 2
// x context chunks (:1335-1338); Transformer Engine's flash or fused attention, not eager; and the gradient groups
// dpsim models with it (Megatron's DDP or distributed optimizer, FSDP over data x context: not DeepSpeed's, not
// HSDP's).
ContextRule context_rule(const Scenario& s, int context) {
  if (context <= 1) return ContextRule::ok;
  if (!s.model.transformer) return ContextRule::not_transformer;
  Parallelism p = s.parallelism;
  p.context = context;
  if (s.world_size() % p.model_parallel_gpus() != 0) return ContextRule::world;
  if (s.training.sequence_length % (2 * context) != 0) return ContextRule::sequence;
  if (is_eager(s.training.attention)) return ContextRule::eager_attention;
  if (s.zero_optimization) return ContextRule::deepspeed;
  if (s.parallelism.hybrid) return ContextRule::hybrid;
  return ContextRule::ok;
}

}  // namespace dpsim
