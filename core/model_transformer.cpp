// Transformer families as operations: Llama (RMSNorm, SwiGLU, GQA; the variants' head_dim, biases and extra
// norms as TransformerConfig says), GPT-2 and BERT
// (LayerNorm and bias, GELU MLP, learned positions). FLOPs: 2 per multiply-add; backward of a GEMM
// is dX plus dW, twice the forward; attention score/value products add 4*T*d per token forward
// (PaLM appendix B), halved for causal models as FlashAttention-style kernels skip the masked half.
#include <string>

#include <fmt/format.h>

#include "model_internal.hpp"

namespace dpsim {

namespace {

struct Builder {
  const TransformerConfig& c;
  double tokens;     // per sample
  double act_bytes;  // bytes per activation element
  std::vector<Op> ops;

  double d() const { return static_cast<double>(c.hidden_size); }

  // A linear layer Y = X W (+ b): saves its input for dW when `saves_input`.
  void linear(const std::string& name, int64_t in, int64_t out, bool bias, bool saves_input) {
    Op op;
    op.name = name;
    op.kind = OpKind::matmul;
    op.params.push_back({name + ".weight", in * out});
    if (bias) op.params.push_back({name + ".bias", out});
    const double flops = 2.0 * tokens * static_cast<double>(in) * static_cast<double>(out);
    op.forward_flops_per_sample = flops;
    op.backward_flops_per_sample = 2.0 * flops;
    op.activation_bytes_per_sample = saves_input ? tokens * static_cast<double>(in) * act_bytes : 0.0;
    op.gemms.push_back({static_cast<int64_t>(tokens), out, in, 1});
    ops.push_back(std::move(op));
  }

  // Memory-bound elementwise work over `width` features per token: reads `reads` and writes `writes` tensors.
  void elementwise(const std::string& name, int64_t width, std::vector<ParamTensor> params, double reads, double writes,
                   double saved_tensors) {
    Op op;
    op.name = name;
    op.kind = OpKind::elementwise;
    op.params = std::move(params);
    const double tensor = tokens * static_cast<double>(width) * act_bytes;
    op.forward_bytes_per_sample = (reads + writes) * tensor;
    op.backward_bytes_per_sample = (reads + writes + 1.0) * tensor;  // reads dY and the saved input, writes dX
    op.activation_bytes_per_sample = saved_tensors * tensor;
    ops.push_back(std::move(op));
  }

  // x + f(x) over the hidden width: reads both, writes the sum; backward, autograd adds the two gradients that
  // meet at x (read 2, write 1). No saved tensor. (Every block has two: modeling_llama.py, modeling_gpt2.py and
  // modeling_bert.py's `hidden_states = residual + hidden_states`, llm-foundry's `x = x + ...`.)
  void residual(const std::string& name) {
    elementwise(name, c.hidden_size, {}, 2, 1, 0);
    ops.back().backward_bytes_per_sample = ops.back().forward_bytes_per_sample;
  }

  void norm(const std::string& name, bool bias) { norm(name, bias, c.hidden_size, c.hidden_size); }

  // A norm over `width` features per token whose weight has `size` entries (qwen3's per-head q/k norms).
  void norm(const std::string& name, bool bias, int64_t width, int64_t size) {
    std::vector<ParamTensor> p{{name + ".weight", size}};
    if (bias) p.push_back({name + ".bias", size});
    elementwise(name, width, std::move(p), 1, 1, 1);
  }

  void attention_core(const std::string& name, bool causal) {
    Op op;
    op.name = name;
    op.kind = OpKind::attention;
    const int64_t hd = c.head_size();
    const double q = static_cast<double>(c.num_heads * hd);  // query width: hidden_size unless head_dim says
    const double full = 4.0 * tokens * tokens * q;           // QK^T and AV, per sample
    op.forward_flops_per_sample = causal ? full / 2 : full;
    op.backward_flops_per_sample = 2.0 * op.forward_flops_per_sample;
    const auto t = static_cast<int64_t>(tokens);
    op.gemms.push_back({t, t, hd, c.num_heads});  // scores = Q K^T per head
    op.gemms.push_back({t, hd, t, c.num_heads});  // out = P V per head
    const double kv = static_cast<double>(c.num_kv_heads * hd);
    op.activation_bytes_per_sample = tokens * (2.0 * q + 2.0 * kv) * act_bytes;  // q, k, v, out (flash keeps no scores)
    ops.push_back(std::move(op));
  }

  void embedding(const std::string& name, std::vector<ParamTensor> tables, double table_rows) {
    Op op;
    op.name = name;
    op.kind = OpKind::embedding;
    op.params = std::move(tables);
    const double rows = tokens * d() * act_bytes;
    op.forward_bytes_per_sample = 2.0 * rows;                // gather: read rows, write activations
    op.backward_bytes_per_sample = 2.0 * rows;               // scatter-add of dY into the gradient rows
    op.backward_fixed_bytes = table_rows * d() * act_bytes;  // dense gradient zero-fill, once per step
    ops.push_back(std::move(op));
  }

  void loss(const std::string& name) {
    Op op;
    op.name = name;
    op.kind = OpKind::elementwise;
    const double logits = tokens * static_cast<double>(c.vocab_size) * 4.0;  // fp32 softmax over the vocabulary
    op.forward_bytes_per_sample = 2.0 * logits;
    op.backward_bytes_per_sample = 2.0 * logits;
    op.activation_bytes_per_sample = logits;
    ops.push_back(std::move(op));
  }
};

void llama_layer(Builder& b, int64_t i) {
  const TransformerConfig& c = b.c;
  const int64_t hd = c.head_size(), q = c.num_heads * hd, kv = c.num_kv_heads * hd;
  const std::string p = fmt::format("layers.{}.", i);
  b.norm(p + "input_layernorm", false);
  b.linear(p + "self_attn.q_proj", c.hidden_size, q, c.qkv_bias, true);
  b.linear(p + "self_attn.k_proj", c.hidden_size, kv, c.qkv_bias, false);
  b.linear(p + "self_attn.v_proj", c.hidden_size, kv, c.qkv_bias, false);
  if (c.qk_norm) {
    b.norm(p + "self_attn.q_norm", false, q, hd);
    b.norm(p + "self_attn.k_norm", false, kv, hd);
  }
  b.attention_core(p + "self_attn.core", true);
  b.linear(p + "self_attn.o_proj", q, c.hidden_size, c.o_bias, true);
  b.norm(p + "post_attention_layernorm", false);  // gemma2: on the attention output; else before the MLP
  b.residual(p + "attn_residual");
  if (c.sandwich_norms) b.norm(p + "pre_feedforward_layernorm", false);
  b.linear(p + "mlp.gate_proj", c.hidden_size, c.intermediate_size, c.mlp_bias, true);
  b.linear(p + "mlp.up_proj", c.hidden_size, c.intermediate_size, c.mlp_bias, false);
  b.elementwise(p + "mlp.act_fn", c.intermediate_size, {}, 2, 1, 2);  // SiLU(gate) * up (GELU for gemma)
  b.linear(p + "mlp.down_proj", c.intermediate_size, c.hidden_size, c.mlp_bias, true);
  if (c.sandwich_norms) b.norm(p + "post_feedforward_layernorm", false);
  b.residual(p + "mlp_residual");
}

void gpt2_layer(Builder& b, int64_t i) {
  const TransformerConfig& c = b.c;
  const std::string p = fmt::format("h.{}.", i);
  b.norm(p + "ln_1", true);
  b.linear(p + "attn.c_attn", c.hidden_size, 3 * c.hidden_size, true, true);
  b.attention_core(p + "attn.core", true);
  b.linear(p + "attn.c_proj", c.hidden_size, c.hidden_size, true, true);
  b.residual(p + "attn_residual");
  b.norm(p + "ln_2", true);
  b.linear(p + "mlp.c_fc", c.hidden_size, c.intermediate_size, true, true);
  b.elementwise(p + "mlp.act", c.intermediate_size, {}, 1, 1, 1);
  b.linear(p + "mlp.c_proj", c.intermediate_size, c.hidden_size, true, true);
  b.residual(p + "mlp_residual");
}

void bert_layer(Builder& b, int64_t i) {
  const TransformerConfig& c = b.c;
  const std::string p = fmt::format("encoder.layer.{}.", i);
  b.linear(p + "attention.self.query", c.hidden_size, c.hidden_size, true, true);
  b.linear(p + "attention.self.key", c.hidden_size, c.hidden_size, true, false);
  b.linear(p + "attention.self.value", c.hidden_size, c.hidden_size, true, false);
  b.attention_core(p + "attention.self.core", false);
  b.linear(p + "attention.output.dense", c.hidden_size, c.hidden_size, true, true);
  b.residual(p + "attention.output.residual");
  b.norm(p + "attention.output.LayerNorm", true);
  b.linear(p + "intermediate.dense", c.hidden_size, c.intermediate_size, true, true);
  b.elementwise(p + "intermediate.act", c.intermediate_size, {}, 1, 1, 1);
  b.linear(p + "output.dense", c.intermediate_size, c.hidden_size, true, true);
  b.residual(p + "output.residual");
  b.norm(p + "output.LayerNorm", true);
}

}  // namespace

std::vector<Op> transformer_ops(const TransformerConfig& c, int64_t sequence_length, double act_bytes) {
  Builder b{c, static_cast<double>(sequence_length), act_bytes, {}};
  const int64_t V = c.vocab_size, d = c.hidden_size;
  switch (c.family) {
    case ModelFamily::llama:
      b.embedding("embed_tokens", {{"embed_tokens.weight", V * d}}, static_cast<double>(V));
      for (int64_t i = 0; i < c.num_layers; ++i) llama_layer(b, i);
      b.norm("norm", false);
      break;
    case ModelFamily::gpt2:
      b.embedding("wte+wpe", {{"wte.weight", V * d}, {"wpe.weight", c.max_position_embeddings * d}},
                  static_cast<double>(V + c.max_position_embeddings));
      for (int64_t i = 0; i < c.num_layers; ++i) gpt2_layer(b, i);
      b.norm("ln_f", true);
      break;
    case ModelFamily::bert:
      b.embedding("embeddings",
                  {{"embeddings.word_embeddings.weight", V * d},
                   {"embeddings.position_embeddings.weight", c.max_position_embeddings * d},
                   {"embeddings.token_type_embeddings.weight", c.type_vocab_size * d}},
                  static_cast<double>(V + c.max_position_embeddings + c.type_vocab_size));
      b.norm("embeddings.LayerNorm", true);
      for (int64_t i = 0; i < c.num_layers; ++i) bert_layer(b, i);
      b.linear("pooler.dense", d, d, true, false);  // on the first token only: negligible compute
      b.ops.back().forward_flops_per_sample = 2.0 * static_cast<double>(d * d);
      b.ops.back().backward_flops_per_sample = 4.0 * static_cast<double>(d * d);
      b.ops.back().gemms = {{1, d, d, 1}};
      break;
  }
  // Output projection over the vocabulary; tied models reuse the embedding, so it owns no tensor.
  const bool tied = c.tie_embeddings || c.family != ModelFamily::llama;
  b.linear("lm_head", d, V, false, true);
  if (tied) b.ops.back().params.clear();
  b.loss("loss");
  return std::move(b.ops);
}

}  // namespace dpsim
