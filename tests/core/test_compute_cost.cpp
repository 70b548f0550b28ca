// The compute model of issue 15: per-op time from the op's kind and shape (core/compute_cost.cpp).
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "../source_dir.hpp"
#include "dpsim/compute_cost.hpp"
#include "dpsim/load.hpp"
#include "dpsim/sweep_spec.hpp"

using namespace dpsim;

namespace {
std::string src(const std::string& rel) { return std::string(DPSIM_SOURCE_DIR) + "/" + rel; }
Scenario llama() { return load_scenario(src("scenarios/llama3.1-8b-8xh100.yaml")); }
// An elementwise op's time over what its bytes take at the streaming bandwidth; backward without the DDP bucket copy
// of its gradients (a copy kernel of its own, at its bytes).
double time_over_bytes(const Scenario& sc, const std::string& name, bool backward) {
  const ComputeModel m = compute_model(sc);
  for (const PlanOp& op : make_step_plan(sc).ops) {
    if (op.name != name) continue;
    if (!backward) return forward_seconds(op, m) / memory_seconds(op.forward_bytes, m);
    const double copy = memory_seconds(op.grad_copy_bytes, m);
    return (backward_seconds(op, m) - copy) / memory_seconds(op.backward_bytes - op.grad_copy_bytes, m);
  }
  FAIL("no op " << name);
  return 0.0;
}
const PlanOp& op_of(const StepPlan& p, OpKind kind) {
  for (const PlanOp& op : p.ops)
    if (op.kind == kind) return op;
  FAIL("no such op");
  return p.ops.front();
}
}  // namespace

TEST_CASE("GEMM quantization: whole waves of tiles over the SMs") {
  const ComputeModel m = compute_model(llama());  // H100: 132 SMs
  // 4096 x 4096: 128 tiles of 128x128 -> one wave of 132 slots at best, or the 256x128 tiles in 4 of 512.
  CHECK(gemm_quantization_efficiency({4096, 4096, 4096, 1}, m) > 0.95);
  CHECK(gemm_quantization_efficiency({4096, 4096, 4096, 1}, m) == Approx(512.0 / 528));
  // 133 tiles of 256x128 need two waves (50% busy); the best tile (64x64: 1064 tiles in 9 waves) recovers most.
  CHECK(gemm_quantization_efficiency({256, 128 * 133, 4096, 1}, m) == Approx(256.0 * 128 * 133 / (9 * 132 * 64 * 64)));
  // A 64x64 output with a long inner dimension is split over the SMs (split-K), not run on one.
  CHECK(gemm_quantization_efficiency({64, 64, 1 << 20, 1}, m) > 0.9);
  // A tiny GEMM is bound by its operands' bytes, not its FLOPs.
  const GemmShape thin{8, 4096, 4096, 1};
  CHECK(gemm_seconds(thin, m) ==
        Approx(m.gemm_fixed_time_s + memory_seconds((8.0 * 4096 + 4096.0 * 4096 + 8.0 * 4096) * 2, m)));
}

TEST_CASE("the GEMM model against measured H100 cuBLAS GEMMs (XLA's sm_90 table)") {
  const ComputeModel m = compute_model(llama());  // H100-SXM, bf16
  const YAML::Node table = YAML::LoadFile(src("validation/gemm/h100-xla-sm90.yaml"));
  REQUIRE(table["gpu"].as<std::string>() == "H100-SXM");
  std::vector<double> errors, without_fixed_time;
  ComputeModel bare = m;
  bare.gemm_fixed_time_s = 0;
  for (const YAML::Node& e : table["gemms"]) {
    const GemmShape g{e["m"].as<int64_t>(), e["n"].as<int64_t>(), e["k"].as<int64_t>(), e["b"].as<int64_t>()};
    const double flops = 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k) *
                         static_cast<double>(g.batch);
    const double measured = e["flops_per_s"].as<double>();
    errors.push_back(std::abs(flops / gemm_seconds(g, m) / measured - 1));
    without_fixed_time.push_back(std::abs(flops / gemm_seconds(g, bare) / measured - 1));
  }
  REQUIRE(errors.size() == 33);
  std::sort(errors.begin(), errors.end());
  std::sort(without_fixed_time.begin(), without_fixed_time.end());
  CHECK(errors[errors.size() / 2] <= 0.05);             // median |error|
  CHECK(errors.back() <= 0.25);                         // worst
  CHECK(without_fixed_time[errors.size() / 2] > 0.20);  // the fixed time is what the table asks for
}

TEST_CASE("a calibrated shape replaces the shape model for that shape only") {
  Scenario s = llama();
  const GemmShape g{2048, 4096, 4096, 1};
  const double model_s = gemm_seconds(g, compute_model(s));
  s.topology.gpu.gemm_efficiency_by_shape[{g.m, g.n, g.k, g.batch}] = 0.4;
  const ComputeModel m = compute_model(s);
  CHECK(gemm_seconds(g, m) == Approx(2.0 * 2048 * 4096 * 4096 / (m.peak_flops_per_s * 0.4)));
  CHECK(gemm_seconds(g, m) > model_s);
}

TEST_CASE("flash attention: its own efficiency, backward as much longer as measured; eager moves the scores") {
  Scenario s = llama();
  const StepPlan plan = make_step_plan(s);
  const PlanOp& attn = op_of(plan, OpKind::attention);
  const ComputeModel flash = compute_model(s);
  CHECK(forward_seconds(attn, flash) ==
        Approx(attn.forward_flops / (flash.peak_flops_per_s * s.topology.gpu.attention_efficiency)));
  // data/gpus.yaml kernels.attention_backward_time_factor: FlashAttention-2's backward measured 3.0-3.4x its forward
  // (validation/measured/2026-12-04), not its 2.5x work.
  CHECK(s.topology.gpu.attention_backward_time_factor == Approx(3.2));
  CHECK(backward_seconds(attn, flash) == Approx(3.2 * forward_seconds(attn, flash)));
  s.training.attention = AttentionImpl::eager;
  const ComputeModel eager = compute_model(s);
  CHECK(forward_seconds(attn, eager) > forward_seconds(attn, flash));
}

TEST_CASE("cuDNN's fused attention at its own measured rate and backward factor, against the H200 probe") {
  // training.attention: cudnn (data/gpus.yaml cudnn_attention_efficiency 0.60 on Hopper SXM parts and
  // kernels.cudnn_attention_backward_time_factor 3.52, the middle of three shapes measured on one H200). The three
  // shapes themselves (validation/measured/2026-12-04/torch-llama-probe.json "sdpa_backends", CUDNN_ATTENTION:
  // Llama 3.1 8B's 32 heads of 128, causal) come out within 15% forward and backward.
  Scenario s = load_scenario(src("scenarios/llama3.1-8b-8xh200.yaml"));
  s.training.attention = AttentionImpl::cudnn;
  const ComputeModel m = compute_model(s);
  CHECK(m.attention_efficiency == Approx(0.60));
  CHECK(m.attention_backward_time_factor == Approx(3.52));
  s.training.attention = AttentionImpl::flash;
  CHECK(compute_model(s).attention_efficiency == Approx(0.30));  // FlashAttention-2 keeps its own
  const YAML::Node probe = YAML::LoadFile(src("validation/measured/2026-12-04/torch-llama-probe.json"));
  int shapes = 0;
  for (const YAML::Node& row : probe["sdpa_backends"]) {
    if (row["backend"].as<std::string>() != "CUDNN_ATTENTION") continue;
    s.training.attention = AttentionImpl::cudnn;
    s.training.micro_batch = row["batch"].as<int64_t>();
    s.training.sequence_length = row["seq"].as<int64_t>();
    const StepPlan plan = make_step_plan(s);
    const PlanOp& attn = op_of(plan, OpKind::attention);
    INFO("sequence " << s.training.sequence_length);
    CHECK(forward_seconds(attn, m) / row["forward_s"].as<double>() == Approx(1.0).epsilon(0.15));
    CHECK(backward_seconds(attn, m) / row["backward_s"].as<double>() == Approx(1.0).epsilon(0.15));
    ++shapes;
  }
  CHECK(shapes == 3);
}

TEST_CASE("eager elementwise kernels take kernels.eager_elementwise_time_factor times their bytes; fused ones do not") {
  // data/gpus.yaml: fitted to PyTorch's Llama 3.1 8B block on one H200 (validation/measured/2026-12-04), 1.41.
  Scenario s = llama();
  REQUIRE(s.training.elementwise == ElementwiseImpl::eager);
  CHECK(s.topology.gpu.eager_elementwise_time_factor == Approx(1.41));
  const auto norm_seconds = [](const Scenario& sc, bool backward) {
    return time_over_bytes(sc, "layers.0.input_layernorm", backward);
  };
  CHECK(norm_seconds(s, false) == Approx(1.41));
  CHECK(norm_seconds(s, true) == Approx(1.41));
  for (const PlanOp& op : make_step_plan(s).ops) {  // the residual adds are vectorized: at their bytes
    if (op.name == "layers.0.attn_residual") CHECK(op.eager_kernel == EagerKernel::none);
    if (op.name == "layers.0.self_attn.repeat_kv" || op.name == "layers.0.self_attn.rotary")
      CHECK(op.eager_kernel == EagerKernel::unfused);
  }
  s.training.elementwise = ElementwiseImpl::fused;
  CHECK(norm_seconds(s, false) == Approx(1.0));
  CHECK(norm_seconds(s, true) == Approx(1.0));
}

TEST_CASE("eager GPT-2 runs PyTorch's LayerNorm and GELU kernels at their measured time over their bytes") {
  // data/gpus.yaml kernels.native_kernel_time_factor, measured on llm-foundry's MPT-760m block in PyTorch 2.11 on one
  // H200 (validation/measured/2026-12-04/torch-llama-probe.json "mpt_blocks"). The DDP bucket copy of the norm's
  // gradients is a copy kernel of its own, at its bytes.
  Scenario s = load_scenario(src("scenarios/gpt2-124m-4xrtx4090.yaml"));
  REQUIRE(s.training.elementwise == ElementwiseImpl::eager);
  const auto factor = time_over_bytes;
  CHECK(factor(s, "h.0.ln_1", false) == Approx(2.33));
  CHECK(factor(s, "h.0.ln_1", true) == Approx(3.47));
  CHECK(factor(s, "ln_f", true) == Approx(3.47));
  CHECK(factor(s, "h.0.mlp.act", false) == Approx(1.54));
  CHECK(factor(s, "h.0.mlp.act", true) == Approx(1.36));
  CHECK(factor(s, "h.0.mlp_residual", false) == Approx(1.0));  // a vectorized add: at its bytes
  for (const PlanOp& op : make_step_plan(s).ops)
    if (op.name == "h.0.ln_1") CHECK(op.grad_copy_bytes > 0);  // the copy is there, and not scaled
  s.training.elementwise = ElementwiseImpl::fused;             // Megatron-LM / apex FusedLayerNorm: at its bytes
  CHECK(factor(s, "h.0.ln_1", true) == Approx(1.0));
  CHECK(factor(s, "h.0.mlp.act", false) == Approx(1.0));
}

TEST_CASE("a biased linear's backward reads dY once more for its bias gradient, where its weight trains") {
  // PyTorch's addmm backward: grad_bias = grad.sum(0), a reduce kernel per biased linear (seen in PyTorch 2.11's
  // profile of llm-foundry's MPT block: validation/measured/2026-12-04/torch-llama-probe.json "mpt_blocks").
  const Scenario s = load_scenario(src("scenarios/gpt2-124m-4xrtx4090.yaml"));
  const StepPlan plan = make_step_plan(s);
  const ComputeModel m = compute_model(s);
  for (const PlanOp& op : plan.ops) {
    if (op.name != "h.0.mlp.c_fc") continue;
    const double tokens = static_cast<double>(s.training.micro_batch * s.training.sequence_length);
    CHECK(op.bias_grad_bytes == Approx(tokens * 3072 * 2));  // dY: tokens x 4 x 768, bf16
    PlanOp no_bias = op;
    no_bias.bias_grad_bytes = 0;
    CHECK(backward_seconds(op, m) - backward_seconds(no_bias, m) == Approx(memory_seconds(op.bias_grad_bytes, m)));
    PlanOp frozen = op;  // no weight gradient (LoRA's base layers): no bias gradient either
    frozen.weight_grad = false;
    no_bias.weight_grad = false;
    CHECK(backward_seconds(frozen, m) == Approx(backward_seconds(no_bias, m)));
    return;
  }
  FAIL("no h.0.mlp.c_fc");
}

TEST_CASE("eager_16bit (Megatron-LM 2019) moves 16 and 14 bytes per score element, eager (HF) 16 and 32") {
  // data/gpus.yaml kernels.eager_attention_bytes_per_score, counted from each implementation's ops.
  // No recomputation: the backward is the backward's alone.
  Scenario s =
      load_scenario(src("scenarios/megatron-1.2b-1xv100.yaml"), {{"training.activation_checkpointing", "none"}});
  const StepPlan plan = make_step_plan(s);
  const PlanOp& attn = op_of(plan, OpKind::attention);
  const double scores = 8.0 * 16 * 1024 * 1024;  // micro-batch 8, 16 heads, 1024 x 1024 scores each
  const double dropout = 2 * 2 + 1;              // attention_dropout 0.1: read and write fp16, a one-byte mask
  const auto memory_part = [&](AttentionImpl impl, bool backward) {
    s.training.attention = impl;
    const ComputeModel m = compute_model(s);
    double gemms = 0;
    for (const GemmShape& g : attn.gemms) {
      if (!backward) gemms += gemm_seconds(g, m);
      if (backward) gemms += gemm_seconds({g.m, g.k, g.n, g.batch}, m) + gemm_seconds({g.k, g.n, g.m, g.batch}, m);
    }
    return ((backward ? backward_seconds(attn, m) : forward_seconds(attn, m)) - gemms) *
           m.memory_bandwidth_bytes_per_s * m.memory_efficiency;
  };
  CHECK(memory_part(AttentionImpl::eager_16bit, false) == Approx(scores * (16 + dropout)));
  CHECK(memory_part(AttentionImpl::eager_16bit, true) == Approx(scores * (14 + dropout)));
  CHECK(memory_part(AttentionImpl::eager, false) == Approx(scores * (16 + dropout)));
  CHECK(memory_part(AttentionImpl::eager, true) == Approx(scores * (32 + dropout)));
}

TEST_CASE("flash1 on a GPU with a published benchmark: the rate of its mask, head size and sequence length") {
  ComputeModel m;
  m.memory_bandwidth_bytes_per_s = 1e12;
  m.memory_efficiency = 1;
  m.attention = AttentionImpl::flash1;
  m.attention_backward_factor = 2.5;
  m.attention_backward_time_factor = 3.2;  // not for a published pair: its FLOP convention splits it
  m.attention_rates = {{true, 64, {{512, 50e12}, {2048, 70e12}}},
                       {true, 128, {{512, 40e12}, {2048, 60e12}}},
                       {false, 128, {{512, 90e12}}}};
  PlanOp attn;
  attn.kind = OpKind::attention;
  attn.causal = true;
  const auto shaped = [&](int64_t seq, int64_t head_dim) {
    attn.gemms = {{seq, seq, head_dim, 16}, {seq, head_dim, seq, 16}};
    return published_attention_rate(attn, m).value_or(0);
  };
  CHECK(shaped(512, 128) == Approx(40e12));
  CHECK(shaped(2048, 128) == Approx(60e12));
  CHECK(shaped(1024, 128) == Approx(50e12));  // halfway in log2(sequence length)
  CHECK(shaped(256, 128) == Approx(40e12));   // flat beyond the benchmarked lengths
  CHECK(shaped(65536, 128) == Approx(60e12));
  CHECK(shaped(1024, 64) == Approx(60e12));
  CHECK(shaped(1024, 96) == Approx(50e12));  // a tie between 64 and 128: the larger head size
  CHECK(shaped(1024, 80) == Approx(60e12));  // nearest: 64
  attn.causal = false;
  CHECK(shaped(4096, 128) == Approx(90e12));
  // The op's forward and backward together run at the rate: the backward 2.5x the forward.
  attn.causal = true;
  shaped(1024, 128);
  attn.forward_flops = 1e12;
  attn.backward_flops = 2.5e12;
  CHECK(forward_seconds(attn, m) == Approx(1e12 / 50e12));
  CHECK(forward_seconds(attn, m) + backward_seconds(attn, m) == Approx(3.5e12 / 50e12));
  // No curve for the mask: nothing published, the efficiency path applies.
  m.attention_rates = {{false, 128, {{512, 90e12}}}};
  CHECK_FALSE(published_attention_rate(attn, m).has_value());
}

TEST_CASE("flash1 on the catalog's A100 and H100 reads the FlashAttention-2 paper's FlashAttention bars") {
  Scenario s = llama();  // H100, Llama 3.1 8B (head size 128, causal), 2048 tokens per sample
  s.training.attention = AttentionImpl::flash1;
  const StepPlan plan = make_step_plan(s);
  const PlanOp& attn = op_of(plan, OpKind::attention);
  CHECK(attn.causal);
  const ComputeModel h100 = compute_model(s);
  // "(d) causal, head dimension 128", 2k: 108, times the scale fitted to llm-foundry's H100 runs
  // (flash1_fwd_bwd_scale).
  CHECK(published_attention_rate(attn, h100).value_or(0) == Approx(108e12 * 1.244));
  s.training.attention = AttentionImpl::flash;  // FlashAttention-2 keeps its efficiency
  CHECK(compute_model(s).attention_rates.empty());
  s.topology.gpu = load_gpu("A100-SXM-80GB");
  s.training.attention = AttentionImpl::flash1;
  CHECK(published_attention_rate(attn, compute_model(s)).value_or(0) == Approx(69e12));
  CHECK(load_gpu("V100-SXM2-32GB").flash1_rates.empty());  // no benchmark listed: attention_efficiency / 2 as before
}

TEST_CASE("no op runs faster than the CPU launches its kernels") {
  const Scenario s = llama();
  ComputeModel m = compute_model(s);
  PlanOp tiny;
  tiny.kind = OpKind::elementwise;
  tiny.forward_bytes = 1;
  CHECK(forward_seconds(tiny, m) == Approx(s.topology.gpu.kernel_launch_s));
  CHECK(backward_seconds(tiny, m) == Approx(2 * s.topology.gpu.kernel_launch_s));
  OptimizerStep forloop{1000, 1000, 1.0, 9000};
  CHECK(optimizer_seconds(forloop, m) == Approx(9000 * s.topology.gpu.kernel_launch_s));
}

TEST_CASE("the DDP gradient copy adds to a matmul's backward instead of hiding under it") {
  const Scenario s = llama();
  const StepPlan plan = make_step_plan(s);
  const PlanOp& lin = op_of(plan, OpKind::matmul);
  REQUIRE(lin.grad_copy_bytes > 0);
  PlanOp without = lin;
  without.backward_bytes -= without.grad_copy_bytes;
  without.grad_copy_bytes = 0;
  const ComputeModel m = compute_model(s);
  CHECK(backward_seconds(lin, m) == Approx(backward_seconds(without, m) + memory_seconds(lin.grad_copy_bytes, m)));
}
