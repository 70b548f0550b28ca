#include "dpsim/scenario.hpp"

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

const char* to_string(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::automatic: return "auto";
    case Algorithm::ring: return "ring";
    case Algorithm::tree: return "tree";
    case Algorithm::nvls: return "nvls";
  }
  return "?";
}

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
    case Arch::ampere: return "ampere";
    case Arch::ada: return "ada";
    case Arch::hopper: return "hopper";
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
    throw InputError(name + " has no " + to_string(dtype) + " peak rate in data/gpus.yaml (not supported)");
  return peak;
}

double ProtoValues::get(Protocol protocol) const {
  switch (protocol) {
    case Protocol::ll: return ll;
    case Protocol::ll128: return ll128;
    default: return simple;
  }
}

}  // namespace dpsim
