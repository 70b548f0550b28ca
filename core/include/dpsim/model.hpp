#pragma once
// Model zoo math: a model spec becomes a list of operations in forward order, each with the
// parameter tensors it owns, its FLOPs, memory traffic and GEMM shapes per sample.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dpsim/collective_kind.hpp"
#include "dpsim/scenario.hpp"

namespace dpsim {

enum class OpKind { matmul, attention, elementwise, embedding };
const char* to_string(OpKind kind);

struct ParamTensor {
  std::string name;
  int64_t numel = 0;
  bool trainable = true;  // core/trainable.cpp finetune_ops decides; false: frozen (no gradient, no optimizer state)
};

// Megatron-LM's tensor-parallel communication around an op: a collective over the tensor group that blocks the
// compute (Shoeybi et al. 2019, arXiv 1909.08053, Section 3: operators f and g, an all-reduce each; with sequence
// parallelism Korthikanti et al. 2022, arXiv 2205.05198, Section 4.2.2: g an all-gather and g-bar a reduce-scatter).
struct TensorComm {
  CollectiveKind kind = CollectiveKind::all_reduce;
  bool backward = false;        // in the op's backward; else in its forward
  bool before = false;          // before the op's compute; else after it
  double bytes_per_sample = 0;  // the buffer S: one sample's full activations (the whole sequence)
  bool regather = false;        // sequence parallelism: the backward's all-gather of the split input a column-parallel
                                // linear saved, for its weight gradient
};

// How the ops are split: Megatron's tensor parallelism over `degree` GPUs, with sequence parallelism or not.
struct TensorSplit {
  int degree = 1;
  bool sequence_parallel = false;
  // Pipeline stages: the head is on the last stage, the embedding on the first, so a tied model's head holds its own
  // copy of the word embedding (Megatron-LM, megatron/core/models/common/language_module/language_module.py:279-290
  // at d98e8a6: "the duplicated embedding"), whose gradient the two stages all-reduce.
  bool tied_head_copy = false;
  // PyTorch's tensor parallelism (parallelism.tensor_impl torch): a column-parallel linear keeps its gathered input
  // and does not gather it again in the backward.
  bool keeps_gathered_input = false;
  // Context parallelism over `context` GPUs (parallelism.context): each op runs on 1/context of every sample's tokens;
  // the attention's queries are those, its keys and values the whole sequence, passed round the ring.
  int context = 1;
};

// Which eager PyTorch kernels an elementwise op runs as (training.elementwise eager), where their time is not their
// bytes at memory_efficiency: `unfused`, the Llama family's ops written as one kernel per tensor op
// (kernels.eager_elementwise_bytes, repeat_kv, the .contiguous() copy; kernels.eager_elementwise_time_factor);
// `layer_norm` and `gelu`, PyTorch's own one-kernel LayerNorm and GELU (kernels.native_kernel_time_factor).
enum class EagerKernel { none, unfused, layer_norm, gelu };

struct Op {
  std::string name;
  OpKind kind = OpKind::matmul;
  std::vector<ParamTensor> params;
  double forward_flops_per_sample = 0;
  double backward_flops_per_sample = 0;
  double forward_bytes_per_sample = 0;  // memory traffic of memory-bound work
  double backward_bytes_per_sample = 0;
  double backward_fixed_bytes = 0;             // per step, independent of batch (dense embedding grad fill)
  double activation_bytes_per_sample = 0;      // saved for backward
  double recompute_kept_bytes_per_sample = 0;  // attention: its inputs, kept when selective recomputation reruns it
  double output_bytes_per_sample = 0;          // matmul, attention: its forward's result (selective_op caches it)
  std::vector<GemmShape> gemms;                // forward GEMMs per sample
  std::vector<TensorComm> tensor_comms;        // tensor parallelism's collectives around it, in issue order
  // Attention under context parallelism: one sample's keys and values on this GPU (its 1/context of the tokens, its
  // 1/t of the key/value heads), what one step of the ring sends to the next GPU (TensorSplit::context).
  double context_kv_bytes_per_sample = 0;
  bool score_dropout = false;  // attention: dropout on the probabilities (a pass over them when eager)
  bool causal = false;         // attention: causal mask (its FLOPs halved: the kernel skips the masked half)
  bool tied_copy = false;      // its weights are a copy of the word embedding's (TensorSplit::tied_head_copy)
  bool cross_entropy = false;  // the loss: its activations are the fp32 logits (training.cross_entropy)
  // The eager PyTorch kernels its memory-bound work runs as, where they are slower than its bytes at
  // memory_efficiency (training.elementwise eager; the factors: data/gpus.yaml kernels).
  EagerKernel eager_kernel = EagerKernel::none;
  // What its backward computes (core/trainable.cpp; both true when every parameter trains): the gradient of its input
  // (dX: some tensor before it trains) and of its weight (dW: its weight trains; a tied head: the embedding's does).
  bool input_grad = true;
  bool weight_grad = true;
  // Per micro-batch, independent of its size: forward memory traffic, and a copy of weights it holds from its forward
  // to its backward (autocast's 16-bit weight casts, core/autocast.cpp).
  double forward_fixed_bytes = 0;
  double weight_copy_bytes = 0;
  // A biased linear's backward also sums dY over the tokens for its bias's gradient (PyTorch's addmm backward:
  // grad_bias = grad.sum(0), one reduce kernel reading dY), where its weight trains.
  double bias_grad_bytes_per_sample = 0;
  // A layer list's convolution: its input and output feature maps (core/conv_layout.cpp transposes them).
  double feature_map_bytes_per_sample = 0;
  bool fp8 = false;  // a matmul whose GEMMs run in FP8 (training.fp8, core/fp8.cpp)
};

// Ops in forward order. `sequence_length` sets attention cost; dtype sets bytes of activations; a transformer's
// residual stream and norms run in `stream_dtype` when given (autocast on fp32 parameters: fp32), else in that dtype.
// With `split`, each op is what one GPU of the tensor group runs (its FLOPs, bytes, weights and GEMM shapes) with the
// collectives Megatron places around it; a transformer model only (the loader refuses others).
// `eager`: the memory-bound ops as eager PyTorch runs them (training.elementwise eager): the Llama family's at their
// bytes per element (data/gpus.yaml kernels.eager_elementwise_bytes), the other families' LayerNorm and GELU as
// PyTorch's own kernels (EagerKernel); null, one fused kernel each.
std::vector<Op> build_ops(const ModelSpec& model, int64_t sequence_length, Dtype activation_dtype,
                          const TensorSplit& split = {}, std::optional<Dtype> stream_dtype = std::nullopt,
                          const EagerElementwise* eager = nullptr);

int64_t count_parameters(const ModelSpec& model);

struct ParameterGroup {
  std::string name;
  int64_t parameters = 0;
};
// Parameters grouped for `dpsim inspect model`: per tensor and per block.
std::vector<ParameterGroup> parameter_breakdown(const ModelSpec& model);

}  // namespace dpsim
