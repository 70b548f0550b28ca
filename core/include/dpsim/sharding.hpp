#pragma once
// Sharded data parallelism (ZeRO, Rajbhandari et al. 2019, arXiv 1910.02054; PyTorch FSDP, Zhao et al. 2023):
// the model-state memory per GPU of each stage, and the units FSDP gathers and reduces one at a time.
#include <cstdint>
#include <string>

#include "dpsim/scenario.hpp"

namespace dpsim {

// Bytes per parameter of each part of the model state: 16-bit (or fp32) weights, gradients, and the optimizer's
// fp32 state (the master copy when weights are 16-bit, plus the moments): ZeRO's 2 + 2 + K with K = 12 for
// mixed-precision Adam.
struct ModelStateParts {
  double weights = 0;
  double grads = 0;
  double optimizer = 0;
  double total() const { return weights + grads + optimizer; }
};
// What memory.unsharded_bytes_per_gpu holds, in words: zero3's units gathered at once, or under pipelining the
// stage's weights and gradients in full (core/plan.cpp unsharded_in_flight_bytes).
const char* unsharded_memory_label(int pipeline_stages);

// Whether the optimizer updates an fp32 master copy of the weights: 16-bit weights under mixed precision
// (training.master_weights true, the default); fp32 weights are their own master, pure 16-bit keeps none.
bool keeps_fp32_master(Dtype weights, bool master_weights);

// Bytes per parameter of the weights, gradients and optimizer state (training.master_weights: Training's).
ModelStateParts model_state_parts(Dtype param_dtype, Dtype grad_dtype, Optimizer optimizer, bool master_weights);

// ZeRO's Figure 1 / Section 5 over `shards` data-parallel GPUs: stage 1 shards the optimizer state, stage 2 the
// gradients too, stage 3 the weights too.
double sharded_model_state_bytes(double parameters, const ModelStateParts& parts, Sharding sharding, int shards);

// The FSDP unit an op belongs to under the transformer auto-wrap policy: its name up to its first numeric
// component ("layers.3.attn.qkv" -> "layers.3", "h.11.mlp.fc" -> "h.11"); "" for the root (embedding, final
// norm, head), which FSDP's root instance owns.
std::string fsdp_unit_of(const std::string& op_name);

// The FSDP unit of an op under the scenario's wrapping (fsdp.wrap_blocks, fsdp.wrap): `wrap_blocks` consecutive
// blocks share one unit, named by its first block ("layers.6" holds layers 6 and 7 with wrap_blocks 2); with a
// `wrap_module` name, each block's submodule of that name is a unit ("layers.3.mlp") and the rest of the block is
// the root's (FSDP's ModuleWrapPolicy wraps only the modules it names; what they do not hold is the nearest wrapped
// ancestor's: the root). "" is the root.
std::string fsdp_wrapped_unit_of(const std::string& op_name, int wrap_blocks, const std::string& wrap_module);

}  // namespace dpsim
