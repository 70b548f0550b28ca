#include <catch2/catch.hpp>

#include <string>

#include "../source_dir.hpp"
#include "dpsim/load.hpp"
#include "dpsim/model.hpp"

using namespace dpsim;

namespace {
std::string src(const std::string& rel) { return std::string(DPSIM_SOURCE_DIR) + "/" + rel; }
}  // namespace

TEST_CASE("Llama 3.1 8B has 8,030,261,248 parameters (formula 2Vd + L(2d^2+2d*KV*hd+3d*ff+2d) + d)") {
  const ModelSpec m = load_model(src("models/llama-3.1-8b.yaml"));
  const int64_t V = 128256, d = 4096, L = 32, KV = 8, hd = 128, ff = 14336;
  const int64_t formula = 2 * V * d + L * (2 * d * d + 2 * d * KV * hd + 3 * d * ff + 2 * d) + d;
  CHECK(formula == 8030261248);
  CHECK(count_parameters(m) == formula);
}

TEST_CASE("the Hugging Face config.json of Llama 3.1 8B loads to the same count") {
  CHECK(count_parameters(load_model(src("tests/data/llama-3.1-8b-config.json"))) == 8030261248);
}

TEST_CASE("model zoo parameter counts match the published ones") {
  CHECK(count_parameters(load_model(src("models/llama-3.1-70b.yaml"))) == 70553706496);
  CHECK(count_parameters(load_model(src("models/gpt2-124m.yaml"))) == 124439808);
  CHECK(count_parameters(load_model(src("models/gpt2-1.5b.yaml"))) == 1557611200);
  CHECK(count_parameters(load_model(src("models/bert-large.yaml"))) == 335141888);
  CHECK(count_parameters(load_model(src("models/resnet-50.yaml"))) == 25557032);
}

TEST_CASE("Megatron-LM's GPT models count the papers' parameters (their equation plus the final LayerNorm)") {
  // Shoeybi et al. 2019 Table 1: 1.2 and 8.3 billion (V 51,200 padded, 1024 positions).
  CHECK(count_parameters(load_model(src("models/megatron-lm-2019-1.2b.yaml"))) == 1213479936);
  CHECK(count_parameters(load_model(src("models/megatron-lm-2019-8.3b.yaml"))) == 8317040640);
  // Narayanan et al. 2021 equation (2), P = 12lh^2 (1 + 13/(12h) + (V+s)/(12lh)), + 2h:
  // Table 2's 174.6B, Table 1's 1008.0B.
  CHECK(count_parameters(load_model(src("models/megatron-gpt3-175b.yaml"))) == 174615846912);
  CHECK(count_parameters(load_model(src("models/megatron-gpt-1t.yaml"))) == 1008038758400);
}

TEST_CASE("BLOOM 176B: ALiBi has no position table and the embedding LayerNorm adds 2d") {
  // bigscience tr11-176B-ml README: embedding 250880*14336 = 3,596,615,680; a layer 12h^2 + 13h = 2,466,437,120.
  const ModelSpec m = load_model(src("models/bloom-176b.yaml"));
  CHECK(count_parameters(m) == 3596615680LL + 70 * 2466437120LL + 2 * 14336 + 2 * 14336);
  CHECK(count_parameters(m) == 176247271424LL);
  bool position_table = false, embedding_norm = false;
  for (const auto& op : build_ops(m, 2048, Dtype::bf16)) {
    for (const auto& t : op.params) position_table = position_table || t.name == "wpe.weight";
    embedding_norm = embedding_norm || op.name == "word_embeddings_layernorm";
  }
  CHECK_FALSE(position_table);
  CHECK(embedding_norm);
}

TEST_CASE("Megatron-LM 2019 adds each output projection's bias by its own kernel, after the reduction") {
  // models/megatron-lm-2019-1.2b.yaml: separate_output_bias (RowParallelLinear.forward: output_ + self.bias).
  ModelSpec m = load_model(src("models/megatron-lm-2019-1.2b.yaml"));
  const auto count = [](const std::vector<Op>& ops) {
    int n = 0;
    for (const Op& op : ops) n += op.name.find(".bias_add") != std::string::npos ? 1 : 0;
    return n;
  };
  const std::vector<Op> ops = build_ops(m, 1024, Dtype::fp16);
  CHECK(count(ops) == 2 * 40);  // attn.c_proj and mlp.c_proj of each of the 40 layers
  // After its linear, before the dropout; reads the sum and writes the result (1024 x 1536 fp16 per sample), and
  // its backward reads the gradient once for the bias's; it holds no tensor of its own (the bias is the linear's).
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].name != "h.0.attn.c_proj.bias_add") continue;
    CHECK(ops[i - 1].name == "h.0.attn.c_proj");
    CHECK(ops[i + 1].name == "h.0.attn.resid_dropout");
    CHECK(ops[i].forward_bytes_per_sample == 2.0 * 1024 * 1536 * 2);
    CHECK(ops[i].backward_bytes_per_sample == 1024.0 * 1536 * 2);
    CHECK(ops[i].params.empty());
    CHECK(ops[i].activation_bytes_per_sample == 0);
  }
  const int64_t params = count_parameters(m);
  m.transformer->separate_output_bias = false;  // Hugging Face's GPT-2: the bias is the GEMM's
  CHECK(count(build_ops(m, 1024, Dtype::fp16)) == 0);
  CHECK(count_parameters(m) == params);
}

TEST_CASE("training FLOPs of a dense transformer are ~6N per token plus attention") {
  const ModelSpec m = load_model(src("models/llama-3.1-8b.yaml"));
  const int64_t T = 2048;
  double fwd = 0, bwd = 0;
  for (const auto& op : build_ops(m, T, Dtype::bf16)) {
    fwd += op.forward_flops_per_sample;
    bwd += op.backward_flops_per_sample;
  }
  // Matmul parameters exclude the input embedding (a gather) and norms.
  const double matmul_params = 8030261248.0 - 525336576.0 - 32 * 8192 - 4096;
  const double attention = 0.5 * 4.0 * T * 4096.0 * 32 * T;  // causal half of 4*T*d per token per layer
  CHECK(fwd == Approx(2.0 * matmul_params * T + attention).epsilon(1e-9));
  CHECK(bwd == Approx(2.0 * fwd).epsilon(1e-9));
}

namespace {
const Op& op_named(const std::vector<Op>& ops, const std::string& name) {
  for (const Op& op : ops)
    if (op.name == name) return op;
  FAIL("no op " << name);
  return ops.front();
}
bool has_op(const std::vector<Op>& ops, const std::string& name) {
  for (const Op& op : ops)
    if (op.name == name) return true;
  return false;
}
}  // namespace

TEST_CASE("training.elementwise eager: a Llama block's memory-bound ops as torchtitan's eager PyTorch runs them") {
  const ModelSpec m = load_model(src("models/llama-3.1-8b.yaml"));
  const EagerElementwise& e = load_gpu("H100-SXM").eager_elementwise;
  const double tokens = 2048;
  const auto fused = build_ops(m, 2048, Dtype::bf16);
  const auto eager = build_ops(m, 2048, Dtype::bf16, {}, std::nullopt, &e);
  // RMSNorm through fp32: 36 bytes per element forward, 84 backward, 6 kept (data/gpus.yaml), where one fused kernel
  // reads and writes once (4, 6, 2).
  const Op& norm = op_named(eager, "layers.0.input_layernorm");
  CHECK(norm.forward_bytes_per_sample == Approx(tokens * 4096 * 36));
  CHECK(norm.backward_bytes_per_sample == Approx(tokens * 4096 * 84));
  CHECK(norm.activation_bytes_per_sample == Approx(tokens * 4096 * 6));
  CHECK(op_named(fused, "layers.0.input_layernorm").forward_bytes_per_sample == Approx(tokens * 4096 * 4));
  CHECK(norm.params.size() == 1);  // its weight stays its own
  // Rotary over q (4096) and k (1024), 20 bytes each way; repeat_kv copies k and v (1024 each) out to 32 heads (4096
  // each); the attention output's .contiguous() copy; SwiGLU 10 / 18 / 6 bytes per ffn element.
  CHECK(op_named(eager, "layers.0.self_attn.rotary").forward_bytes_per_sample == Approx(tokens * 5120 * 20));
  CHECK(op_named(eager, "layers.0.self_attn.repeat_kv").forward_bytes_per_sample ==
        Approx(tokens * (2 * 1024 + 2 * 4096) * 2));
  CHECK(op_named(eager, "layers.0.self_attn.output_contiguous").backward_bytes_per_sample ==
        Approx(tokens * 2 * 4096 * 2));
  const Op& act = op_named(eager, "layers.0.mlp.act_fn");
  CHECK(act.forward_bytes_per_sample == Approx(tokens * 14336 * 10));
  CHECK(act.backward_bytes_per_sample == Approx(tokens * 14336 * 18));
  CHECK(act.activation_bytes_per_sample == Approx(tokens * 14336 * 6));
  for (const char* name : {"layers.0.self_attn.rotary", "layers.0.self_attn.repeat_kv"}) CHECK(!has_op(fused, name));
  // SDPA keeps the expanded keys and values: q, k, v and out all 4096 wide.
  CHECK(op_named(eager, "layers.0.self_attn.core").activation_bytes_per_sample == Approx(tokens * 4 * 4096 * 2));
  CHECK(op_named(fused, "layers.0.self_attn.core").activation_bytes_per_sample ==
        Approx(tokens * (2 * 4096 + 2 * 1024) * 2));
  // The GEMMs and parameters are the same ops either way.
  double fused_flops = 0, eager_flops = 0;
  for (const Op& op : fused) fused_flops += op.forward_flops_per_sample;
  for (const Op& op : eager) eager_flops += op.forward_flops_per_sample;
  CHECK(eager_flops == fused_flops);
  CHECK(count_parameters(m) == 8030261248);
}

TEST_CASE(
    "training.elementwise eager: an fp32 residual stream (autocast) uses the fp32 RMSNorm; LayerNorm models keep "
    "one kernel") {
  const ModelSpec llama = load_model(src("models/llama-3.1-8b.yaml"));
  const EagerElementwise& e = load_gpu("H100-SXM").eager_elementwise;
  const auto autocast = build_ops(llama, 1024, Dtype::bf16, {}, Dtype::fp32, &e);
  CHECK(op_named(autocast, "layers.0.input_layernorm").forward_bytes_per_sample == Approx(1024.0 * 4096 * 28));
  CHECK(op_named(autocast, "layers.0.self_attn.rotary").forward_bytes_per_sample == Approx(1024.0 * 5120 * 20));
  // GPT-2's LayerNorm and GELU are single PyTorch kernels: eager changes nothing there.
  const ModelSpec gpt2 = load_model(src("models/gpt2-1.5b.yaml"));
  const auto a = build_ops(gpt2, 1024, Dtype::bf16), b = build_ops(gpt2, 1024, Dtype::bf16, {}, std::nullopt, &e);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].name == b[i].name);
    CHECK(a[i].forward_bytes_per_sample == b[i].forward_bytes_per_sample);
    CHECK(a[i].activation_bytes_per_sample == b[i].activation_bytes_per_sample);
  }
}
