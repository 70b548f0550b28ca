#pragma once
// Model zoo math: a model spec becomes a list of operations in forward order, each with the
// parameter tensors it owns, its FLOPs, memory traffic and GEMM shapes per sample.
#include <cstdint>
#include <string>
#include <vector>

#include "dpsim/scenario.hpp"

namespace dpsim {

enum class OpKind { matmul, attention, elementwise, embedding };
const char* to_string(OpKind kind);

struct ParamTensor {
  std::string name;
  int64_t numel = 0;
};

struct Op {
  std::string name;
  OpKind kind = OpKind::matmul;
  std::vector<ParamTensor> params;
  double forward_flops_per_sample = 0;
  double backward_flops_per_sample = 0;
  double forward_bytes_per_sample = 0;  // memory traffic of memory-bound work
  double backward_bytes_per_sample = 0;
  double backward_fixed_bytes = 0;         // per step, independent of batch (dense embedding grad fill)
  double activation_bytes_per_sample = 0;  // saved for backward
  std::vector<GemmShape> gemms;            // forward GEMMs per sample
};

// Ops in forward order. `sequence_length` sets attention cost; dtype sets bytes of activations.
std::vector<Op> build_ops(const ModelSpec& model, int64_t sequence_length, Dtype activation_dtype);

int64_t count_parameters(const ModelSpec& model);

struct ParameterGroup {
  std::string name;
  int64_t parameters = 0;
};
// Parameters grouped for `dpsim inspect model`: per tensor and per block.
std::vector<ParameterGroup> parameter_breakdown(const ModelSpec& model);

}  // namespace dpsim
