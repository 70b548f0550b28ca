// Hugging Face config.json files: for each accepted model_type, the fields that change the parameter count
// or the FLOPs. Other keys (rope_theta, sliding_window, torch_dtype, ...) change neither and are ignored,
// because the file is not ours; a field or model_type dpsim cannot honour is refused by name.
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "dpsim/error.hpp"
#include "load_internal.hpp"

namespace dpsim {

namespace {

// Llama-shaped decoders (RMSNorm, gated MLP, RoPE). Defaults are those of transformers' configuration_*.py
// for a key the file leaves out (head_dim: GemmaConfig 256, Qwen3Config 128, others hidden/heads;
// tie_word_embeddings: True for gemma and gemma2 only). phi3's fused qkv_proj and gate_up_proj hold the
// same tensors as separate q, k, v and gate, up projections.
struct LlamaVariant {
  const char* model_type;
  int64_t default_head_dim;   // 0: hidden_size / num_attention_heads
  bool default_tie;           // tie_word_embeddings when absent
  bool qkv_bias;              // fixed by the architecture: Qwen2Attention has q, k, v biases, no o bias
  bool reads_attention_bias;  // the modeling code honours attention_bias (q, k, v and o biases)
  bool reads_mlp_bias;        // LlamaMLP honours mlp_bias (gate, up, down biases)
  bool qk_norm;               // Qwen3Attention: q_norm and k_norm, RMSNorm of head_dim
  bool sandwich_norms;        // Gemma2DecoderLayer: post-attention, pre- and post-feedforward norms
};

constexpr LlamaVariant kLlamaVariants[] = {
    {"llama", 0, false, false, true, true, false, false},   {"mistral", 0, false, false, false, false, false, false},
    {"qwen2", 0, false, true, false, false, false, false},  {"qwen3", 128, false, false, true, false, true, false},
    {"gemma", 256, true, false, true, false, false, false}, {"gemma2", 256, true, false, true, false, false, true},
    {"phi3", 0, false, false, false, false, false, false},
};

constexpr const char* kAccepted = "llama, mistral, qwen2, qwen3, gemma, gemma2, phi3, gpt2, bert, mpt";

// Mixture-of-experts: expert MLPs and routers are not modelled yet, so their counts would be wrong.
constexpr std::string_view kMoeTypes[] = {"mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "phimoe",
                                          "dbrx",    "olmoe",     "jamba",     "granitemoe",  "llama4",      "gpt_oss"};
constexpr const char* kExpertKeys[] = {"num_local_experts", "num_experts", "n_routed_experts"};

void refuse_moe(const YNode& n, const std::string& type) {
  for (const char* key : kExpertKeys) {
    if (!n.has(key)) continue;
    const int64_t experts = n.at(key).as_int(0, int64_t{1} << 20);
    if (experts > 1) {
      n.at(key).fail(fmt::format("{} experts make \"{}\" a mixture-of-experts model, which dpsim does not model yet",
                                 experts, type));
    }
  }
  for (std::string_view moe : kMoeTypes) {
    if (type == moe) {
      n.at("model_type")
          .fail(fmt::format("\"{}\" is a mixture-of-experts model, which dpsim does not model yet", type));
    }
  }
}

bool flag(const YNode& n, const char* key) { return n.has(key) && n.at(key).as_bool(); }

// A key whose non-default value adds tensors dpsim does not build.
void refuse_true(const YNode& n, const char* key, const char* what) {
  if (flag(n, key)) n.at(key).fail(fmt::format("true adds {}, which dpsim does not model", what));
}

void refuse_untied(const YNode& n, const std::string& type) {
  if (n.has("tie_word_embeddings") && !n.at("tie_word_embeddings").as_bool()) {
    n.at("tie_word_embeddings")
        .fail(fmt::format("false is not modelled for {}: dpsim counts its LM head as tied to the embedding", type));
  }
}

}  // namespace

void read_hf_dims(const YNode& n, TransformerConfig& c) {
  c.vocab_size = model_dim(n.at("vocab_size"));
  c.hidden_size = model_dim(n.at("hidden_size"));
  c.num_layers = n.at("num_hidden_layers").as_int(1, 100000);
  c.num_heads = model_dim(n.at("num_attention_heads"));
  c.num_kv_heads = n.has("num_key_value_heads") ? model_dim(n.at("num_key_value_heads")) : c.num_heads;
  c.intermediate_size = model_dim(n.at("intermediate_size"));
}

namespace {

TransformerConfig parse_llama_variant(const YNode& n, const LlamaVariant& v) {
  TransformerConfig c;
  c.family = ModelFamily::llama;
  read_hf_dims(n, c);
  if (auto p = n.get("max_position_embeddings")) c.max_position_embeddings = model_dim(*p);
  c.head_dim = n.has("head_dim") ? model_dim(n.at("head_dim")) : v.default_head_dim;
  c.tie_embeddings = n.has("tie_word_embeddings") ? n.at("tie_word_embeddings").as_bool() : v.default_tie;
  const bool attention_bias = v.reads_attention_bias && flag(n, "attention_bias");
  c.qkv_bias = v.qkv_bias || attention_bias;
  c.o_bias = attention_bias;
  c.mlp_bias = v.reads_mlp_bias && flag(n, "mlp_bias");
  c.qk_norm = v.qk_norm;
  c.sandwich_norms = v.sandwich_norms;
  return c;
}

// GPT-2's tensors under a config's own names for the width, depth and heads (GPT-2: n_embd, n_layer, n_head; MPT:
// d_model, n_layers, n_heads); multi-head attention (as many key/value heads as heads), tied embeddings.
struct Gpt2Keys {
  const char* hidden;
  const char* layers;
  const char* heads;
};
TransformerConfig gpt2_dims(const YNode& n, const Gpt2Keys& keys) {
  TransformerConfig c;
  c.family = ModelFamily::gpt2;
  c.vocab_size = model_dim(n.at("vocab_size"));
  c.hidden_size = model_dim(n.at(keys.hidden));
  c.num_layers = n.at(keys.layers).as_int(1, 100000);
  c.num_heads = model_dim(n.at(keys.heads));
  c.num_kv_heads = c.num_heads;
  c.tie_embeddings = true;
  return c;
}

TransformerConfig parse_gpt2(const YNode& n) {
  refuse_true(n, "add_cross_attention", "cross-attention layers");
  refuse_untied(n, "gpt2");
  TransformerConfig c = gpt2_dims(n, {"n_embd", "n_layer", "n_head"});
  c.intermediate_size = n.has("n_inner") ? model_dim(n.at("n_inner")) : 4 * c.hidden_size;  // null: 4 * n_embd
  c.max_position_embeddings = model_dim(n.at("n_positions"));
  return c;
}

TransformerConfig parse_bert(const YNode& n) {
  refuse_true(n, "add_cross_attention", "cross-attention layers");
  refuse_untied(n, "bert");
  if (auto p = n.get("position_embedding_type"); p && p->as_string() != "absolute") {
    p->fail(fmt::format("\"{}\" adds relative-position tensors, which dpsim does not model (only \"absolute\")",
                        p->as_string()));
  }
  TransformerConfig c;
  c.family = ModelFamily::bert;
  read_hf_dims(n, c);
  c.max_position_embeddings = model_dim(n.at("max_position_embeddings"));
  c.type_vocab_size = n.has("type_vocab_size") ? n.at("type_vocab_size").as_int(0, int64_t{1} << 24) : 2;
  c.tie_embeddings = true;
  return c;
}

// MosaicML MPT (llm-foundry llmfoundry/models/mpt/configuration_mpt.py @8c8dd48, MPTConfig's defaults:
// learned_pos_emb True, no_bias False, tie_word_embeddings True, ffn_config.ffn_type mptmlp (up_proj, GELU,
// down_proj; d_model x expansion_ratio), attn_config.alibi False, fused Wqkv, LayerNorm with bias): with those
// defaults, GPT-2's tensors exactly, so it is built as the gpt2 family. The values that remove or change tensors
// are refused by name.
TransformerConfig parse_mpt(const YNode& n) {
  refuse_untied(n, "mpt");
  refuse_true(n, "no_bias", "bias-free layers (MPT no_bias)");
  if (n.has("learned_pos_emb") && !n.at("learned_pos_emb").as_bool())
    n.at("learned_pos_emb").fail("false (no position table) is not modelled for mpt: dpsim builds MPT with its table");
  if (auto a = n.get("attn_config")) refuse_true(*a, "alibi", "ALiBi attention without a position table");
  if (auto f = n.get("ffn_config"); f && f->has("ffn_type") && f->at("ffn_type").as_string() != "mptmlp")
    f->at("ffn_type")
        .fail(fmt::format("\"{}\" is not modelled for mpt (only \"mptmlp\": up, GELU, down)",
                          f->at("ffn_type").as_string()));
  TransformerConfig c = gpt2_dims(n, {"d_model", "n_layers", "n_heads"});
  const int64_t ratio = n.has("expansion_ratio") ? n.at("expansion_ratio").as_int(1, 1024) : 4;  // MPTConfig: 4
  c.intermediate_size = ratio * c.hidden_size;
  c.max_position_embeddings = model_dim(n.at("max_seq_len"));
  return c;
}

}  // namespace

TransformerConfig parse_hf_config(const YNode& n) {
  const std::string type = n.at("model_type").as_string();
  refuse_moe(n, type);
  TransformerConfig c;
  if (type == "gpt2") {
    c = parse_gpt2(n);
  } else if (type == "bert") {
    c = parse_bert(n);
  } else if (type == "mpt") {
    c = parse_mpt(n);
  } else {
    const LlamaVariant* variant = nullptr;
    for (const auto& v : kLlamaVariants) {
      if (type == v.model_type) variant = &v;
    }
    if (!variant) n.at("model_type").fail(fmt::format("\"{}\" is not supported (accepted: {})", type, kAccepted));
    c = parse_llama_variant(n, *variant);
  }
  check_heads(c, n);
  return c;
}

}  // namespace dpsim
