// Hugging Face config.json files: the real files in tests/data/hf/ (sources and the published counts quoted in
// tests/data/hf/SOURCES.md) count their exact published parameters; what dpsim cannot honour is refused by name.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "../source_dir.hpp"
#include "dpsim/error.hpp"
#include "dpsim/load.hpp"
#include "dpsim/model.hpp"

using namespace dpsim;
namespace fs = std::filesystem;

namespace {

std::string hf(const std::string& model) {
  return std::string(DPSIM_SOURCE_DIR) + "/tests/data/hf/" + model + "/config.json";
}

int64_t count(const std::string& model) { return count_parameters(load_model(hf(model))); }

// A config.json written for one test (for shapes no shipped file has).
fs::path write_config(const std::string& name, const std::string& json) {
  const fs::path file = fs::temp_directory_path() / ("dpsim-hf-" + std::to_string(getpid()) + "-" + name + ".json");
  std::ofstream(file) << json;
  return file;
}

std::string load_error(const fs::path& file) {
  try {
    load_model(file);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

double attention_forward_flops(const ModelSpec& m, int64_t tokens) {
  double flops = 0;
  for (const auto& op : build_ops(m, tokens, Dtype::bf16)) {
    if (op.kind == OpKind::attention) flops += op.forward_flops_per_sample;
  }
  return flops;
}

}  // namespace

TEST_CASE("real config.json files count their published parameters") {
  CHECK(count("qwen2.5-7b") == 7615616512);               // q, k, v biases (no o bias)
  CHECK(count("qwen3-8b") == 8190735360);                 // explicit head_dim, q_norm and k_norm
  CHECK(count("llama-3.2-3b") == 3212749824);             // tied embeddings
  CHECK(count("mistral-nemo-base-2407") == 12247782400);  // head_dim 128 with 32 heads != hidden 5120
  CHECK(count("gemma-2-9b-it") == 9241705984);            // head_dim 256, four norms per layer, tied by default
  CHECK(count("phi-3-mini-4k-instruct") == 3821079552);   // fused qkv/gate_up: the same tensors
  CHECK(count("gpt2") == 124439808);                      // n_inner null = 4 * n_embd, tied head
}

TEST_CASE("the existing Llama 3.1 8B config.json still counts 8,030,261,248") {
  CHECK(count_parameters(load_model(std::string(DPSIM_SOURCE_DIR) + "/tests/data/llama-3.1-8b-config.json")) ==
        8030261248);
}

TEST_CASE("Qwen2's biases are the q, k, v ones: 28 layers x (3584 + 2 x 512)") {
  const ModelSpec m = load_model(hf("qwen2.5-7b"));
  int64_t biases = 0;
  for (const auto& op : build_ops(m, 1, Dtype::bf16)) {
    for (const auto& p : op.params) {
      if (p.name.size() > 5 && p.name.compare(p.name.size() - 5, 5, ".bias") == 0) biases += p.numel;
    }
  }
  CHECK(biases == 28 * (3584 + 2 * 512));
}

TEST_CASE("FLOPs follow head_dim: Mistral-Nemo's attention is 32 heads x 128, not its hidden 5120") {
  const ModelSpec m = load_model(hf("mistral-nemo-base-2407"));
  const int64_t T = 4096;
  // causal half of 4 * T^2 * (heads x head_dim) per layer, 40 layers
  CHECK(attention_forward_flops(m, T) == Approx(40 * 0.5 * 4.0 * T * T * (32 * 128)).epsilon(1e-12));
  for (const auto& op : build_ops(m, T, Dtype::bf16)) {
    if (op.name == "layers.0.self_attn.q_proj") CHECK(op.forward_flops_per_sample == 2.0 * T * 5120 * 4096);
  }
}

TEST_CASE("gemma (v1): head_dim 256 x 16 heads = 4096 != hidden 3072, embeddings tied by default") {
  // GemmaConfig's documented defaults (= google/gemma-7b); keras-hub gemma_presets.py "gemma_7b_en":
  // "params": 8537680896.
  const fs::path file = write_config("gemma-7b", R"({"model_type": "gemma", "vocab_size": 256000,
    "hidden_size": 3072, "intermediate_size": 24576, "num_hidden_layers": 28, "num_attention_heads": 16,
    "num_key_value_heads": 16, "head_dim": 256})");
  CHECK(count_parameters(load_model(file)) == 8537680896);
  fs::remove(file);
}

TEST_CASE("attention_bias and mlp_bias add their biases to a llama config") {
  const std::string base = R"("model_type": "llama", "vocab_size": 1000, "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2)";
  const fs::path plain = write_config("plain", "{" + base + "}");
  const fs::path biased = write_config("biased", "{" + base + R"(, "attention_bias": true, "mlp_bias": true})");
  // per layer: q 64 + k 32 + v 32 + o 64 biases, gate 128 + up 128 + down 64
  CHECK(count_parameters(load_model(biased)) - count_parameters(load_model(plain)) == 2 * (192 + 320));
  fs::remove(plain);
  fs::remove(biased);
}

TEST_CASE("a mixture-of-experts config.json is refused, naming the key and the model_type") {
  CHECK(load_error(hf("qwen3-30b-a3b")) ==
        hf("qwen3-30b-a3b") +
            ":22: num_experts: 128 experts make \"qwen3_moe\" a mixture-of-experts model, which dpsim does not "
            "model yet");
  const fs::path mixtral = write_config("mixtral", R"({"model_type": "mixtral", "vocab_size": 32000,
    "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32})");
  CHECK(load_error(mixtral) == mixtral.string() +
                                   ":1: model_type: \"mixtral\" is a mixture-of-experts model, which dpsim does not "
                                   "model yet");
  fs::remove(mixtral);
}

TEST_CASE("an unknown or missing model_type is refused, listing the accepted ones") {
  const fs::path falcon = write_config("falcon", R"({"model_type": "falcon", "hidden_size": 4544})");
  CHECK(load_error(falcon) == falcon.string() +
                                  ":1: model_type: \"falcon\" is not supported (accepted: llama, mistral, qwen2, "
                                  "qwen3, gemma, gemma2, phi3, gpt2, bert, mpt)");
  const fs::path none = write_config("none", R"({"hidden_size": 4096})");
  CHECK(load_error(none) == none.string() + ":1: missing required key \"model_type\"");
  fs::remove(falcon);
  fs::remove(none);
}

TEST_CASE("fields that would add tensors dpsim does not build are refused by name") {
  const fs::path bert = write_config("bert-relative", R"({"model_type": "bert", "vocab_size": 30522,
    "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
    "max_position_embeddings": 512, "position_embedding_type": "relative_key"})");
  CHECK(load_error(bert) == bert.string() +
                                ":3: position_embedding_type: \"relative_key\" adds relative-position tensors, which "
                                "dpsim does not model (only \"absolute\")");
  const fs::path gpt2 = write_config("gpt2-untied", R"({"model_type": "gpt2", "vocab_size": 50257,
    "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024, "tie_word_embeddings": false})");
  CHECK(load_error(gpt2) == gpt2.string() +
                                ":2: tie_word_embeddings: false is not modelled for gpt2: dpsim counts its LM head "
                                "as tied to the embedding");
  fs::remove(bert);
  fs::remove(gpt2);
}

TEST_CASE("MPT as llm-foundry benchmarks it counts the README's published NumParams") {
  // scripts/train/benchmarking/README.md @8c8dd48, NumParams column at SeqLen 2048 (validation/reference/e2e-fsdp.yaml)
  const std::string models = std::string(DPSIM_SOURCE_DIR) + "/models/";
  CHECK(count_parameters(load_model(models + "mpt-125m.yaml")) == 125311488);
  CHECK(count_parameters(load_model(models + "mpt-7b.yaml")) == 6658859008);
  CHECK(count_parameters(load_model(models + "mpt-70b.yaml")) == 64862437376);
  // the learned position table follows max_seq_len: 13b at 8192 publishes 12885411840
  const fs::path long13 = write_config("mpt-13b-8k", R"({"model_type": "mpt", "d_model": 5120, "n_heads": 40,
    "n_layers": 40, "expansion_ratio": 4, "max_seq_len": 8192, "vocab_size": 50368})");
  CHECK(count_parameters(load_model(long13)) == 12885411840);
  fs::remove(long13);
}

TEST_CASE("MPT options that change its tensors are refused by name") {
  const fs::path alibi = write_config("mpt-alibi", R"({"model_type": "mpt", "d_model": 768, "n_heads": 12,
    "n_layers": 12, "max_seq_len": 2048, "vocab_size": 50368, "attn_config": {"alibi": true}})");
  CHECK(load_error(alibi) == alibi.string() +
                                 ":2: attn_config.alibi: true adds ALiBi attention without a position table, which "
                                 "dpsim does not model");
  const fs::path nobias = write_config("mpt-nobias", R"({"model_type": "mpt", "d_model": 768, "n_heads": 12,
    "n_layers": 12, "max_seq_len": 2048, "vocab_size": 50368, "no_bias": true})");
  CHECK(load_error(nobias) ==
        nobias.string() + ":2: no_bias: true adds bias-free layers (MPT no_bias), which dpsim does not model");
  fs::remove(alibi);
  fs::remove(nobias);
}
