#pragma once
// What a step trains (training.trainable): the one place that decides, for every parameter, whether it is trainable,
// and what that leaves of each op's backward. Everything downstream asks ParamTensor::trainable and Op::input_grad /
// weight_grad: the gradients and their buckets (core/plan.cpp), the optimizer step and the model state, FSDP's
// reduce-scatters, the dW GEMMs (core/compute_cost.cpp, the backend's kernels).
#include <string>
#include <vector>

#include "dpsim/model.hpp"
#include "dpsim/scenario.hpp"

namespace dpsim {

// PEFT's module match (peft/tuners/tuners_utils.py check_target_module_exists): the op is named `module` or its name
// ends with "." + module.
bool names_module(const std::string& op_name, const std::string& module);

// A shell-style pattern over a parameter name: `*` any run of characters (dots too), `?` one character.
bool glob_match(const std::string& pattern, const std::string& name);

// A linear layer LoRA can adapt: a matmul op that owns its weight (one unbatched GEMM).
bool is_linear(const Op& op);

// The ops `module` names among the linear layers; the last name components of every linear layer (for messages).
std::vector<const Op*> linear_ops_named(const std::vector<Op>& ops, const std::string& module);
std::vector<std::string> linear_module_names(const std::vector<Op>& ops);

// The model's ops as training.trainable trains them. all: unchanged. lora: every base tensor frozen and, after each
// run of linear layers that read the same input, each targeted layer's adapter: lora_A (rank x in), lora_B
// (out x rank), the scaled add into the layer's output, and a dropout on the input when lora.dropout > 0 (PEFT
// layer.py Linear.forward). frozen_except: the tensors whose names match a pattern train, the rest are frozen. Then
// each op's backward is what autograd runs: dX only where some tensor before the op trains, dW only for trainable
// weights, nothing (and nothing saved for it) where neither; a frozen linear keeps its input only for an adapter.
std::vector<Op> finetune_ops(std::vector<Op> ops, const Training& training, double activation_bytes);

// Bytes per parameter of a frozen tensor of `op`: QLoRA's stored nf4 bytes for a quantized base linear layer (every
// one but the output layer), else training.param_dtype's.
double frozen_bytes_per_parameter(const Training& training, const Op& op);

// The dtypes of the trainable weights and their gradients: the adapters' (lora.adapter_dtype) under LoRA, else
// training.param_dtype and grad_dtype.
struct TrainableDtypes {
  Dtype weights = Dtype::bf16;
  Dtype grads = Dtype::bf16;
};
TrainableDtypes trainable_dtypes(const Training& training);
// The optimizer as it keeps its state, for reports: "adamw", or "adamw in bf16, no fp32 master" for pure 16-bit
// training (training.master_weights false on 16-bit trainable weights).
std::string optimizer_state_label(const Training& training);

}  // namespace dpsim
