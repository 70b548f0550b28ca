// Transformer families as operations: Llama (RMSNorm, SwiGLU, GQA; the variants' head_dim, biases and extra
// norms as TransformerConfig says), GPT-2 and BERT
// (LayerNorm and bias, GELU MLP, learned positions). FLOPs: 2 per multiply-add; backward of a GEMM
// is dX plus dW, twice the forward; attention score/value products add 4*T*d per token forward
// (PaLM appendix B), halved for causal models as FlashAttention-style kernels skip the masked half.
#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "model_internal.hpp"

namespace dpsim {

namespace {

// How a linear layer is split over the tensor group (Megatron-LM's ColumnParallelLinear / RowParallelLinear):
// `column_entry` is the first column-parallel GEMM reading a block's (replicated) input, where operator f sits: its
// backward all-reduces the input gradient; `row` ends the split region, where operator g all-reduces the output.
enum class Split { none, column, column_entry, row };

int64_t div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct Builder {
  const TransformerConfig& c;
  double tokens;        // per sample
  double act_bytes;     // bytes per activation element: the matmuls' and attention's (training.compute_dtype)
  double stream_bytes;  // the residual stream's and its norms' (autocast: the fp32 parameters'; else act_bytes)
  TensorSplit split;
  std::vector<Op> ops;
  // training.elementwise eager: the Llama family's ops at these bytes (one kernel per tensor op); a LayerNorm (a norm
  // with a bias) and GELU as PyTorch's own kernels.
  const EagerElementwise* eager = nullptr;

  double d() const { return static_cast<double>(c.hidden_size); }
  int64_t t() const { return split.degree; }
  // The share of the sequence a replicated op (norm, residual) runs on: all of it, or 1/t with sequence parallelism.
  double seq_share() const { return split.sequence_parallel ? 1.0 / static_cast<double>(t()) : 1.0; }
  // One sample's full activations of `width` features: the buffer of a tensor-parallel collective.
  double full(int64_t width) const { return tokens * static_cast<double>(width) * act_bytes; }
  // torch.autocast on fp32 parameters: the embedding's fp32 rows start an fp32 residual stream, the norms run in
  // fp32 (layer_norm is on autocast's float32 list; LlamaRMSNorm upcasts itself) and the residual adds promote to
  // fp32; the matmuls cast their inputs to the 16-bit compute dtype (PyTorch AMP docs, "Autocast Op Reference").
  bool autocast() const { return stream_bytes != act_bytes; }

  // Autocast's cast of a matmul's fp32 input (the normed stream) to the compute dtype: every linear casts its own (only
  // weights, leaf tensors, are cached: aten/src/ATen/autocast_mode.cpp cached_cast, "arg.is_leaf()"); backward casts
  // the 16-bit input gradient back to fp32. No saved tensor: the linear keeps the cast copy.
  void input_cast(const std::string& name, int64_t width) {
    Op op;
    op.name = name + ".autocast_input";
    op.kind = OpKind::elementwise;
    op.forward_bytes_per_sample = tokens * static_cast<double>(width) * (stream_bytes + act_bytes);
    op.backward_bytes_per_sample = op.forward_bytes_per_sample;
    ops.push_back(std::move(op));
  }

  // Operator f (entering a split region): backward all-reduce of the input gradient; with sequence parallelism an
  // all-gather of the sequence-split input before the forward, the same all-gather again before the backward (the
  // linear saves its split input, ctx.save_for_backward(input, weight), and gathers it for the weight gradient; not
  // with PyTorch's tensor parallelism, which keeps the gathered input) and a
  // reduce-scatter of the input gradient after it (Megatron-LM megatron/core/tensor_parallel/layers.py at d98e8a6,
  // LinearWithGradAccumulationAndAsyncCommunication: forward :604 and :623-629, backward :667-680 and :700-709).
  void enter_split(Op& op, int64_t width) const {
    if (t() == 1) return;
    if (!split.sequence_parallel) {
      op.tensor_comms.push_back({CollectiveKind::all_reduce, true, false, full(width)});
      return;
    }
    op.tensor_comms.push_back({CollectiveKind::all_gather, false, true, full(width)});
    if (!split.keeps_gathered_input)
      op.tensor_comms.push_back({CollectiveKind::all_gather, true, true, full(width), true});
    op.tensor_comms.push_back({CollectiveKind::reduce_scatter, true, false, full(width)});
  }
  // Operator g (leaving it): forward all-reduce of the output; with sequence parallelism a reduce-scatter after the
  // forward and an all-gather of the output gradient before the backward (RowParallelLinear.forward).
  void leave_split(Op& op, int64_t width) const {
    if (t() == 1) return;
    if (!split.sequence_parallel) {
      op.tensor_comms.push_back({CollectiveKind::all_reduce, false, false, full(width)});
      return;
    }
    op.tensor_comms.push_back({CollectiveKind::reduce_scatter, false, false, full(width)});
    op.tensor_comms.push_back({CollectiveKind::all_gather, true, true, full(width)});
  }

  // A linear layer Y = X W (+ b): saves its input for dW when `saves_input`. Split by columns, each GPU of the tensor
  // group holds out/t of the outputs' weights and bias; by rows, in/t of the inputs' weights and the whole bias (added
  // after the reduction).
  void linear(const std::string& name, int64_t in, int64_t out, bool bias, bool saves_input, Split how = Split::none) {
    const bool column = how == Split::column || how == Split::column_entry;
    if (column && autocast()) {  // reads the fp32 stream: casts it, and keeps its own copy
      input_cast(name, in);
      saves_input = true;
    }
    const int64_t in_local = how == Split::row ? in / t() : in;
    const int64_t out_local = column ? div_up(out, t()) : out;
    Op op;
    op.name = name;
    op.kind = OpKind::matmul;
    op.params.push_back({name + ".weight", in_local * out_local});
    if (bias) op.params.push_back({name + ".bias", out_local});
    // The bias's gradient reads dY once (a bias added by a kernel of its own after the reduction: bias_add's).
    if (bias && !(how == Split::row && c.separate_output_bias)) op.bias_grad_bytes_per_sample = full(out_local);
    const double flops = 2.0 * tokens * static_cast<double>(in_local) * static_cast<double>(out_local);
    op.forward_flops_per_sample = flops;
    op.backward_flops_per_sample = 2.0 * flops;
    // A column-parallel GEMM's input is the replicated (or, with sequence parallelism, sequence-split) block input;
    // PyTorch's tensor parallelism keeps the gathered one (the linears' autograd saves the tensor PrepareModuleInput
    // redistributed to Replicate: torchtitan models/llama3/infra/parallelize.py at f18e68c6, :225-240).
    const double saved = how == Split::row                       ? full(in_local)
                         : column && !split.keeps_gathered_input ? full(in) * seq_share()
                                                                 : full(in);
    op.activation_bytes_per_sample = saves_input ? saved : 0.0;
    op.output_bytes_per_sample = full(out_local);  // the GEMM's result, before any tensor-parallel reduction
    op.gemms.push_back({static_cast<int64_t>(tokens), out_local, in_local, 1});
    if (how == Split::column_entry) enter_split(op, in);
    if (how == Split::row) leave_split(op, out);
    ops.push_back(std::move(op));
    if (how == Split::row && bias && c.separate_output_bias) bias_add(name + ".bias_add", out);
  }

  // A row-parallel linear's bias added after the reduction by a kernel of its own (Megatron-LM 93ab4bea
  // mpu/layers.py RowParallelLinear.forward: "output_ = reduce_from_model_parallel_region(output_parallel)", then
  // "output = output_ + self.bias"): forward reads the sum and writes the result; backward the gradient passes
  // through and the bias's gradient reads it once (a sum over the tokens). Replicated over the tensor group; the bias
  // is the linear's tensor.
  void bias_add(const std::string& name, int64_t width) {
    Op op;
    op.name = name;
    op.kind = OpKind::elementwise;
    const double tensor = tokens * static_cast<double>(width) * act_bytes * seq_share();
    op.forward_bytes_per_sample = 2.0 * tensor;
    op.backward_bytes_per_sample = tensor;
    ops.push_back(std::move(op));
  }

  // Memory-bound elementwise work over `width` features per token: reads `reads` and writes `writes` tensors.
  // `share` is the part of the sequence it runs on (1/t for a replicated op under sequence parallelism).
  // `bytes` per element: act_bytes unless given (the stream's).
  void elementwise(const std::string& name, int64_t width, std::vector<ParamTensor> params, double reads, double writes,
                   double saved_tensors, double share = 1.0, double bytes = 0) {
    Op op;
    op.name = name;
    op.kind = OpKind::elementwise;
    op.params = std::move(params);
    const double tensor = tokens * static_cast<double>(width) * (bytes > 0 ? bytes : act_bytes) * share;
    op.forward_bytes_per_sample = (reads + writes) * tensor;
    op.backward_bytes_per_sample = (reads + writes + 1.0) * tensor;  // reads dY and the saved input, writes dX
    op.activation_bytes_per_sample = saved_tensors * tensor;
    ops.push_back(std::move(op));
  }

  // x + f(x) over the hidden width: reads both, writes the sum; backward, autograd adds the two gradients that
  // meet at x (read 2, write 1). No saved tensor. (Every block has two: modeling_llama.py, modeling_gpt2.py and
  // modeling_bert.py's `hidden_states = residual + hidden_states`, llm-foundry's `x = x + ...`.) Replicated over the
  // tensor group.
  // Under autocast it reads the fp32 stream and the 16-bit branch and writes fp32.
  void residual(const std::string& name) {
    elementwise(name, c.hidden_size, {}, 2, 1, 0, seq_share());
    Op& op = ops.back();
    op.forward_bytes_per_sample *= (2.0 * stream_bytes + act_bytes) / (3.0 * act_bytes);
    op.backward_bytes_per_sample = op.forward_bytes_per_sample;
  }

  // Dropout over the hidden width (hidden_dropout > 0; Megatron-LM 93ab4bea mpu/transformer.py: after the attention
  // output projection and the MLP, and on the embedding output): forward reads x and writes the result and a one-byte
  // (bool) mask, which it keeps for the backward (Korthikanti et al. 2022, Section 4.1: a mask of sbh bytes); backward
  // reads dY and the mask and writes dX. Replicated over the tensor group, like the residual it feeds.
  void dropout(const std::string& name) {
    if (!(c.hidden_dropout > 0)) return;
    Op op;
    op.name = name;
    op.kind = OpKind::elementwise;
    const double elements = tokens * d() * seq_share();
    op.forward_bytes_per_sample = elements * (2.0 * act_bytes + 1.0);
    op.backward_bytes_per_sample = op.forward_bytes_per_sample;
    op.activation_bytes_per_sample = elements;
    ops.push_back(std::move(op));
  }

  // A norm over the hidden width: replicated over the tensor group (its weight too), split along the sequence with
  // sequence parallelism.
  void norm(const std::string& name, bool bias) {
    norm(name, bias, c.hidden_size, c.hidden_size, seq_share(), stream_bytes);
  }

  // A norm over `width` features per token whose weight has `size` entries (qwen3's per-head q/k norms, on the 16-bit
  // projections), `bytes` per element (act_bytes unless given).
  void norm(const std::string& name, bool bias, int64_t width, int64_t size, double share = 1.0, double bytes = 0) {
    std::vector<ParamTensor> p{{name + ".weight", size}};
    if (bias) p.push_back({name + ".bias", size});
    if (!bias && eager) {  // RMSNorm, as torchtitan and Hugging Face write it
      eager_op(name, static_cast<double>(width) * share, eager->rms_norm.of(bytes > 0 ? bytes : act_bytes));
      ops.back().params = std::move(p);
      return;
    }
    elementwise(name, width, std::move(p), 1, 1, 1, share, bytes);
    if (eager) ops.back().eager_kernel = EagerKernel::layer_norm;  // a LayerNorm: nn.LayerNorm, F.layer_norm
  }

  // The MLP's GELU over `width` features per token, one kernel (nn.GELU, F.gelu): reads and writes it, keeps its input.
  void gelu(const std::string& name, int64_t width) {
    elementwise(name, width, {}, 1, 1, 1);
    if (eager) ops.back().eager_kernel = EagerKernel::gelu;
  }

  // An eager op over `elements` per token, at its bytes per element (data/gpus.yaml kernels.eager_elementwise_bytes).
  void eager_op(const std::string& name, double elements, const EagerOpBytes& bytes) {
    Op op;
    op.name = name;
    op.kind = OpKind::elementwise;
    op.forward_bytes_per_sample = tokens * elements * bytes.forward;
    op.backward_bytes_per_sample = tokens * elements * bytes.backward;
    op.activation_bytes_per_sample = tokens * elements * bytes.saved;
    op.eager_kernel = EagerKernel::unfused;
    ops.push_back(std::move(op));
  }

  // A copy of `in` elements per token into `out` (eager: repeat_kv's .expand().reshape(), the attention output's
  // .transpose(1, 2).contiguous()): forward reads and writes once, backward the same the other way.
  void copy(const std::string& name, double in, double out) {
    Op op;
    op.name = name;
    op.kind = OpKind::elementwise;
    op.forward_bytes_per_sample = tokens * (in + out) * act_bytes;
    op.backward_bytes_per_sample = op.forward_bytes_per_sample;
    op.eager_kernel = EagerKernel::unfused;
    ops.push_back(std::move(op));
  }

  // Attention over this GPU's heads: 1/t of the query and key/value heads (the loader checks t divides both).
  void attention_core(const std::string& name, bool causal) {
    Op op;
    op.name = name;
    op.kind = OpKind::attention;
    const int64_t hd = c.head_size(), heads = c.num_heads / t();
    const double q = static_cast<double>(heads * hd);  // query width: hidden_size unless head_dim says
    // Context parallelism: this GPU's queries (`tokens`) against every key of the sample. Causal, its two chunks (the
    // i-th and the (2c-1-i)-th of 2c) see as many unmasked keys as any other GPU's: 1/c of the causal work each.
    const double keys = tokens * static_cast<double>(split.context);
    const double full_flops = 4.0 * tokens * keys * q;  // QK^T and AV, per sample
    op.forward_flops_per_sample = causal ? full_flops / 2 : full_flops;
    op.backward_flops_per_sample = 2.0 * op.forward_flops_per_sample;
    const auto n = static_cast<int64_t>(tokens), nk = static_cast<int64_t>(keys);
    op.gemms.push_back({n, nk, hd, heads});  // scores = Q K^T per head
    op.gemms.push_back({n, hd, nk, heads});  // out = P V per head
    const double kv = static_cast<double>(c.num_kv_heads / t() * hd);
    if (split.context > 1) op.context_kv_bytes_per_sample = tokens * 2.0 * kv * act_bytes;
    // Eager GQA copies k and v out to every query head (repeat_kv) before SDPA, which keeps the copies.
    const double kv_kept = eager ? q : kv;
    op.activation_bytes_per_sample = tokens * (2.0 * q + 2.0 * kv_kept) * act_bytes;  // q, k, v, out (flash: no scores)
    op.recompute_kept_bytes_per_sample = tokens * (q + 2.0 * kv_kept) * act_bytes;    // q, k, v: its recompute's inputs
    // Its results: the output and, from a flash kernel, the fp32 log-sum-exp of each query row per head
    // (aten _scaled_dot_product_flash_attention returns both; torchtitan's selective_op caches them).
    op.output_bytes_per_sample = tokens * q * act_bytes + tokens * static_cast<double>(heads) * 4.0;
    op.score_dropout = c.attention_dropout > 0;
    op.causal = causal;
    ops.push_back(std::move(op));
  }

  // The token embedding, vocabulary-parallel (Megatron's VocabParallelEmbedding: each GPU holds 1/t of the rows, padded
  // up, and the lookups are summed over the tensor group: an all-reduce, or a reduce-scatter into the sequence-split
  // layout with sequence parallelism). `split_rows` are split so; `other_rows` (position, token-type tables) are not.
  void embedding(const std::string& name, std::vector<ParamTensor> split_tables,
                 std::vector<ParamTensor> other_tables) {
    Op op;
    op.name = name;
    op.kind = OpKind::embedding;
    double rows = 0;
    for (ParamTensor& p : split_tables) {
      p.numel = div_up(p.numel / c.hidden_size, t()) * c.hidden_size;
      rows += static_cast<double>(p.numel) / d();
      op.params.push_back(p);
    }
    for (const ParamTensor& p : other_tables) {
      rows += static_cast<double>(p.numel) / d();
      op.params.push_back(p);
    }
    const double lookups = full(c.hidden_size);
    const double rows_moved = lookups * stream_bytes / act_bytes;  // the table's dtype (autocast: fp32)
    op.forward_bytes_per_sample = 2.0 * rows_moved;                // gather: read rows, write activations
    op.backward_bytes_per_sample = 2.0 * rows_moved;               // scatter-add of dY into the gradient rows
    op.backward_fixed_bytes = rows * d() * stream_bytes;           // dense gradient zero-fill, once per step
    // Sequence parallelism: a reduce-scatter only without other tables (else an all-reduce, then a local split), and
    // an all-gather of the gradient in the backward (Megatron-LM d98e8a6 language_model_embedding.py
    // reduce_scatter_embeddings; mappings.py _ReduceScatterToSequenceParallelRegion /
    // _ScatterToSequenceParallelRegion).
    const bool scatter = split.sequence_parallel && other_tables.empty();
    if (t() > 1)
      op.tensor_comms.push_back(
          {scatter ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce, false, false, lookups});
    if (t() > 1 && split.sequence_parallel)
      op.tensor_comms.push_back({CollectiveKind::all_gather, true, true, lookups});
    ops.push_back(std::move(op));
  }

  // Cross-entropy over this GPU's vocabulary shard. Vocab-parallel (megatron/core/tensor_parallel/cross_entropy.py
  // at d98e8a6, VocabParallelCrossEntropy.forward, lines 130, 146 and 150): three all-reduces over the tensor group of
  // one fp32 value per token (the logits' max, the target's logit, the sum of exponentials).
  void loss(const std::string& name) {
    Op op;
    op.name = name;
    op.kind = OpKind::elementwise;
    const double logits = tokens * static_cast<double>(div_up(c.vocab_size, t())) * 4.0;  // fp32 softmax
    op.forward_bytes_per_sample = 2.0 * logits;
    op.backward_bytes_per_sample = 2.0 * logits;
    op.activation_bytes_per_sample = logits;
    op.cross_entropy = true;
    if (t() > 1)
      for (int i = 0; i < 3; ++i) op.tensor_comms.push_back({CollectiveKind::all_reduce, false, false, tokens * 4.0});
    ops.push_back(std::move(op));
  }
};

void llama_layer(Builder& b, int64_t i) {
  const TransformerConfig& c = b.c;
  const int64_t hd = c.head_size(), q = c.num_heads * hd, kv = c.num_kv_heads * hd;
  const std::string p = fmt::format("layers.{}.", i);
  b.norm(p + "input_layernorm", false);
  b.linear(p + "self_attn.q_proj", c.hidden_size, q, c.qkv_bias, true, Split::column_entry);
  b.linear(p + "self_attn.k_proj", c.hidden_size, kv, c.qkv_bias, false, Split::column);
  b.linear(p + "self_attn.v_proj", c.hidden_size, kv, c.qkv_bias, false, Split::column);
  if (c.qk_norm) {  // per head: each GPU normalizes its own heads
    b.norm(p + "self_attn.q_norm", false, q / b.t(), hd);
    b.norm(p + "self_attn.k_norm", false, kv / b.t(), hd);
  }
  const double q_local = static_cast<double>(q / b.t()), kv_local = static_cast<double>(kv / b.t());
  if (b.eager) {  // eager PyTorch (torchtitan model.py Attention.forward): rotary, then GQA's key/value copies
    b.eager_op(p + "self_attn.rotary", q_local + kv_local, b.eager->rotary.of(b.act_bytes));
    if (kv < q) b.copy(p + "self_attn.repeat_kv", 2.0 * kv_local, 2.0 * q_local);
  }
  b.attention_core(p + "self_attn.core", true);
  if (b.eager) b.copy(p + "self_attn.output_contiguous", q_local, q_local);
  b.linear(p + "self_attn.o_proj", q, c.hidden_size, c.o_bias, true, Split::row);
  b.dropout(p + "self_attn.dropout");
  b.norm(p + "post_attention_layernorm", false);  // gemma2: on the attention output; else before the MLP
  b.residual(p + "attn_residual");
  if (c.sandwich_norms) b.norm(p + "pre_feedforward_layernorm", false);
  b.linear(p + "mlp.gate_proj", c.hidden_size, c.intermediate_size, c.mlp_bias, true, Split::column_entry);
  b.linear(p + "mlp.up_proj", c.hidden_size, c.intermediate_size, c.mlp_bias, false, Split::column);
  if (b.eager)  // F.silu(gate) then * up (gemma: F.gelu(approximate="tanh"), one kernel as silu)
    b.eager_op(p + "mlp.act_fn", static_cast<double>(c.intermediate_size / b.t()), b.eager->gated_act.of(b.act_bytes));
  else
    b.elementwise(p + "mlp.act_fn", c.intermediate_size / b.t(), {}, 2, 1, 2);  // SiLU(gate) * up, fused
  b.linear(p + "mlp.down_proj", c.intermediate_size, c.hidden_size, c.mlp_bias, true, Split::row);
  b.dropout(p + "mlp.dropout");
  if (c.sandwich_norms) b.norm(p + "post_feedforward_layernorm", false);
  b.residual(p + "mlp_residual");
}

void gpt2_layer(Builder& b, int64_t i) {
  const TransformerConfig& c = b.c;
  const std::string p = fmt::format("h.{}.", i);
  b.norm(p + "ln_1", true);
  b.linear(p + "attn.c_attn", c.hidden_size, 3 * c.hidden_size, true, true, Split::column_entry);
  b.attention_core(p + "attn.core", true);
  b.linear(p + "attn.c_proj", c.hidden_size, c.hidden_size, true, true, Split::row);
  b.dropout(p + "attn.resid_dropout");
  b.residual(p + "attn_residual");
  b.norm(p + "ln_2", true);
  b.linear(p + "mlp.c_fc", c.hidden_size, c.intermediate_size, true, true, Split::column_entry);
  b.gelu(p + "mlp.act", c.intermediate_size / b.t());
  b.linear(p + "mlp.c_proj", c.intermediate_size, c.hidden_size, true, true, Split::row);
  b.dropout(p + "mlp.dropout");
  b.residual(p + "mlp_residual");
}

void bert_layer(Builder& b, int64_t i) {
  const TransformerConfig& c = b.c;
  const std::string p = fmt::format("encoder.layer.{}.", i);
  b.linear(p + "attention.self.query", c.hidden_size, c.hidden_size, true, true, Split::column_entry);
  b.linear(p + "attention.self.key", c.hidden_size, c.hidden_size, true, false, Split::column);
  b.linear(p + "attention.self.value", c.hidden_size, c.hidden_size, true, false, Split::column);
  b.attention_core(p + "attention.self.core", false);
  b.linear(p + "attention.output.dense", c.hidden_size, c.hidden_size, true, true, Split::row);
  b.dropout(p + "attention.output.dropout");
  b.residual(p + "attention.output.residual");
  b.norm(p + "attention.output.LayerNorm", true);
  b.linear(p + "intermediate.dense", c.hidden_size, c.intermediate_size, true, true, Split::column_entry);
  b.gelu(p + "intermediate.act", c.intermediate_size / b.t());
  b.linear(p + "output.dense", c.intermediate_size, c.hidden_size, true, true, Split::row);
  b.dropout(p + "output.dropout");
  b.residual(p + "output.residual");
  b.norm(p + "output.LayerNorm", true);
}

}  // namespace

std::vector<Op> transformer_ops(const TransformerConfig& c, int64_t sequence_length, double act_bytes,
                                const TensorSplit& split, double stream_bytes, const EagerElementwise* eager) {
  const double stream = stream_bytes > 0 ? stream_bytes : act_bytes;
  // Context parallelism: each GPU runs every op on its 1/context of the tokens (the loader checks they divide).
  Builder b{c,         static_cast<double>(sequence_length) / static_cast<double>(std::max(1, split.context)),
            act_bytes, stream,
            split,     {},
            eager};
  const int64_t V = c.vocab_size, d = c.hidden_size;
  switch (c.family) {
    case ModelFamily::llama:
      b.embedding("embed_tokens", {{"embed_tokens.weight", V * d}}, {});
      b.dropout("embed_dropout");
      for (int64_t i = 0; i < c.num_layers; ++i) llama_layer(b, i);
      b.norm("norm", false);
      break;
    case ModelFamily::gpt2:
      if (c.alibi)
        b.embedding("wte", {{"wte.weight", V * d}}, {});
      else
        b.embedding("wte+wpe", {{"wte.weight", V * d}}, {{"wpe.weight", c.max_position_embeddings * d}});
      if (c.embedding_norm) b.norm("word_embeddings_layernorm", true);
      b.dropout("drop");
      for (int64_t i = 0; i < c.num_layers; ++i) gpt2_layer(b, i);
      b.norm("ln_f", true);
      break;
    case ModelFamily::bert:
      b.embedding("embeddings", {{"embeddings.word_embeddings.weight", V * d}},
                  {{"embeddings.position_embeddings.weight", c.max_position_embeddings * d},
                   {"embeddings.token_type_embeddings.weight", c.type_vocab_size * d}});
      b.norm("embeddings.LayerNorm", true);
      for (int64_t i = 0; i < c.num_layers; ++i) bert_layer(b, i);
      b.linear("pooler.dense", d, d, true, false);  // on the first token only: negligible compute
      b.ops.back().forward_flops_per_sample = 2.0 * static_cast<double>(d * d);
      b.ops.back().backward_flops_per_sample = 4.0 * static_cast<double>(d * d);
      b.ops.back().gemms = {{1, d, d, 1}};
      break;
  }
  // Output projection over the vocabulary, column-parallel (each GPU its vocabulary shard's logits, never gathered:
  // the loss is vocab-parallel); tied models reuse the embedding, so it owns no tensor, unless pipeline stages put it
  // on another stage than the embedding (split.tied_head_copy: then its weight is the copy).
  const bool tied = c.tie_embeddings || c.family != ModelFamily::llama;
  b.linear("lm_head", d, V, false, true, Split::column_entry);
  if (tied && !b.split.tied_head_copy) b.ops.back().params.clear();
  b.ops.back().tied_copy = tied && b.split.tied_head_copy;
  b.loss("loss");
  return std::move(b.ops);
}

}  // namespace dpsim
