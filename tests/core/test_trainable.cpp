// training.trainable: LoRA and frozen layers (core/trainable.cpp), against PEFT's published counts and closed forms.
#include <catch2/catch.hpp>

#include <string>

#include "../source_dir.hpp"
#include "dpsim/advice.hpp"
#include "dpsim/compute_cost.hpp"
#include "dpsim/estimate.hpp"
#include "dpsim/load.hpp"
#include "dpsim/model.hpp"
#include "dpsim/plan.hpp"
#include "dpsim/program.hpp"
#include "dpsim/sweep_spec.hpp"
#include "dpsim/trainable.hpp"

using namespace dpsim;

namespace {

std::string src(const std::string& rel) { return std::string(DPSIM_SOURCE_DIR) + "/" + rel; }

struct Counts {
  int64_t trainable = 0;
  int64_t all = 0;
};

// PEFT's get_nb_trainable_parameters: every parameter (the adapters too), and those with requires_grad.
Counts count(const ModelSpec& m, const Training& t) {
  Counts c;
  for (const Op& op : finetune_ops(build_ops(m, 16, Dtype::bf16), t, 2.0))
    for (const ParamTensor& p : op.params) {
      c.all += p.numel;
      c.trainable += p.trainable ? p.numel : 0;
    }
  return c;
}

Training lora(int64_t rank, std::vector<std::string> targets) {
  Training t;
  t.trainable = Trainable::lora;
  t.lora.rank = rank;
  t.lora.alpha = 2.0 * static_cast<double>(rank);
  t.lora.target_modules = std::move(targets);
  return t;
}

Scenario lora_scenario(std::vector<Override> extra = {}) {
  return load_scenario(src("scenarios/llama3.1-8b-lora-8xl40s.yaml"), extra);
}

}  // namespace

TEST_CASE("LoRA counts its parameters as PEFT's print_trainable_parameters does (PEFT's own published printouts)") {
  // huggingface/peft README.md line 57 (5d602fd), Qwen/Qwen2.5-3B-Instruct with LoraConfig(r=16, lora_alpha=32) and
  // qwen2's default target modules (q_proj, v_proj): "trainable params: 3,686,400 || all params: 3,089,625,088".
  const Counts qwen = count(load_model(src("tests/data/peft/qwen2.5-3b.json")), lora(16, {"q_proj", "v_proj"}));
  CHECK(qwen.trainable == 3686400);
  CHECK(qwen.all == 3089625088);
  // docs/source/quicktour.md lines 48 and 94, meta-llama/Llama-3.2-1B with LoraConfig(target_modules=["q_proj"], r=8):
  // "trainable params: 524,288 || all params: 1,236,338,688".
  const Counts llama = count(load_model(src("tests/data/peft/llama-3.2-1b.json")), lora(8, {"q_proj"}));
  CHECK(llama.trainable == 524288);
  CHECK(llama.all == 1236338688);
}

TEST_CASE("Llama 3.1 8B, rank 16: the trainable count from the shapes, A (r x in) + B (out x r) per adapted layer") {
  const ModelSpec m = load_model(src("models/llama-3.1-8b.yaml"));
  const int64_t r = 16, d = 4096, q = 32 * 128, kv = 8 * 128, ff = 14336, layers = 32, base = 8030261248;
  const int64_t attention = r * ((d + q) + 2 * (d + kv) + (q + d));
  const int64_t mlp = r * (3 * (d + ff));
  const Counts qkvo = count(m, lora(r, {"q_proj", "k_proj", "v_proj", "o_proj"}));
  CHECK(qkvo.trainable == layers * attention);
  CHECK(qkvo.trainable == 13631488);
  CHECK(qkvo.all == base + 13631488);  // 8,043,892,736
  const Counts linear =
      count(m, lora(r, {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}));
  CHECK(linear.trainable == layers * (attention + mlp));
  CHECK(linear.trainable == 41943040);
  CHECK(linear.all == base + 41943040);  // 8,072,204,288
  // The scenario's plan counts the same; "all-linear" (PEFT's shorthand) is every linear layer but the head.
  const StepPlan plan = make_step_plan(lora_scenario());
  CHECK(plan.trainable_parameters == 13631488);
  CHECK(plan.model_parameters == base + 13631488);
  CHECK(make_step_plan(lora_scenario({{"lora.target_modules", "all-linear"}})).trainable_parameters == 41943040);
}

TEST_CASE("LoRA's all-reduce moves 2(n-1)/n of the trainable gradients' bytes: the buckets hold only them") {
  const Scenario s = lora_scenario();
  const StepPlan plan = make_step_plan(s);
  const double trainable_bytes = 13631488.0 * 4;  // fp32 adapter gradients (PEFT's autocast_adapter_dtype)
  CHECK(plan.gradient_bytes == static_cast<int64_t>(trainable_bytes));
  double bucketed = 0;
  for (const Bucket& b : plan.buckets) bucketed += static_cast<double>(b.bytes);
  CHECK(bucketed == trainable_bytes);
  for (const Grad& g : plan.grads) CHECK(g.name.find(".lora_") != std::string::npos);
  const Estimate e = estimate(s, plan);
  CHECK(e.result.allreduce_bytes_sent_per_gpu == Approx(2.0 * 7 / 8 * trainable_bytes));
  double reduced = 0;
  for (const CommTiming& c : e.result.comm) {
    CHECK(c.kind == "all_reduce");
    reduced += c.bytes;
  }
  CHECK(reduced == trainable_bytes);
  REQUIRE(e.result.trainable_parameters);
  CHECK(*e.result.trainable_parameters == 13631488);
}

TEST_CASE("LoRA's memory: frozen bf16 weights, fp32 adapters with their gradients and Adam state") {
  const Scenario s = lora_scenario();
  const StepPlan plan = make_step_plan(s);
  CHECK(plan.memory.model_state_bytes == 8030261248.0 * 2 + 13631488.0 * 16);
  const StepPlan full = make_step_plan(load_scenario(src("scenarios/llama3.1-8b-8xl40s.yaml")));
  CHECK(full.memory.model_state_bytes == 8030261248.0 * 16);
  CHECK(estimate(s, plan).result.fits);
  CHECK_FALSE(estimate(load_scenario(src("scenarios/llama3.1-8b-8xl40s.yaml")), full).result.fits);
  // The optimizer updates only the adapters: 128 tensors (A and B of 4 layers x 32 blocks).
  CHECK(plan.optimizer.parameters == 13631488);
  CHECK(plan.optimizer.tensors == 256);
}

namespace {

struct PassFlops {
  double forward = 0, backward = 0;
};

PassFlops matmul_flops(const StepPlan& plan, OpKind kind) {
  PassFlops f;
  for (const PlanOp& op : plan.ops)
    if (op.kind == kind) f.forward += op.forward_flops, f.backward += op.backward_flops;
  return f;
}

}  // namespace

TEST_CASE("frozen_except: the backward runs dX only where a tensor before the op trains, dW only where it trains") {
  const std::string file = src("scenarios/llama3.1-8b-8xl40s.yaml");
  const StepPlan full = make_step_plan(load_scenario(file));
  const PassFlops all = matmul_flops(full, OpKind::matmul);
  CHECK(all.backward == Approx(2 * all.forward));
  // Only the first norm trains: every GEMM after it computes dX (the forward's FLOPs) and no dW.
  const StepPlan first =
      make_step_plan(load_scenario(file, {{"training.trainable", "frozen_except"},
                                          {"training.frozen_except", "[layers.0.input_layernorm.weight]"}}));
  const PassFlops dx = matmul_flops(first, OpKind::matmul);
  CHECK(dx.backward == Approx(dx.forward));
  CHECK(matmul_flops(first, OpKind::attention).backward == Approx(matmul_flops(full, OpKind::attention).backward));
  CHECK(first.trainable_parameters == 4096);
  // Only the head trains: its dW (its forward's FLOPs) is the whole backward; nothing below it runs or keeps anything.
  const StepPlan head = make_step_plan(
      load_scenario(file, {{"training.trainable", "frozen_except"}, {"training.frozen_except", "[lm_head.*]"}}));
  double head_forward = 0;
  for (const PlanOp& op : head.ops)
    if (op.name == "lm_head") head_forward = op.forward_flops;
  CHECK(head_forward == Approx(2.0 * 2048 * 4096 * 128256));
  CHECK(matmul_flops(head, OpKind::matmul).backward == Approx(head_forward));
  CHECK(matmul_flops(head, OpKind::attention).backward == 0);
  REQUIRE(head.buckets.size() == 1);  // 1.05 GB of bf16 gradient in one bucket
  CHECK(head.gradient_bytes == int64_t{128256} * 4096 * 2);
  // Beside the loss backward's two fp32 tensors of the logits' size (training.cross_entropy torch), held either way.
  const double loss_backward = 2.0 * 2048 * 128256 * 4;
  CHECK(head.memory.activation_bytes - loss_backward < full.memory.activation_bytes / 10);
  const ComputeModel m = compute_model(load_scenario(file));
  for (const PlanOp& op : head.ops)
    if (op.name.starts_with("layers.")) CHECK(backward_seconds(op, m) == 0);
}

TEST_CASE("LoRA's dropout: one per adapted layer, on its input, which the adapter then keeps") {
  const StepPlan none = make_step_plan(lora_scenario());
  const StepPlan drop = make_step_plan(lora_scenario({{"lora.dropout", "0.05"}}));
  int dropouts = 0;
  for (const PlanOp& op : drop.ops) dropouts += op.name.ends_with(".lora_dropout") ? 1 : 0;
  CHECK(dropouts == 4 * 32);
  // Each keeps a one-byte mask of its input and hands lora_A a bf16 copy (which lora_A keeps); the frozen layers'
  // input, which only the adapters read, is then kept by no one.
  const double t = 2048, d = 4096;
  // q, k, v: three (mask + bf16 copy) for the input the run kept (2 B); o_proj: one for the input it kept.
  const double per_block = 3 * t * d * 3 - t * d * 2 + t * d * 3 - t * d * 2;
  // The first block's q, k, v dropouts read an input that needs no gradient: they keep no mask.
  CHECK(drop.memory.activation_bytes - none.memory.activation_bytes == Approx(32 * per_block - 3 * t * d));
}

TEST_CASE("LoRA under FSDP full_shard: a block with adapters reduces its whole FlatParameter's gradient") {
  const Scenario s = lora_scenario({{"parallelism.sharding", "full_shard"}, {"lora.adapter_dtype", "bf16"}});
  const StepPlan plan = make_step_plan(s);
  // Weights (frozen and adapters) sharded over 8; the adapters' Adam state too; every block's frozen tensors get a
  // gradient (use_orig_params=True mixing frozen and trainable tensors); the root (embedding, norm, head) none.
  const double base = 8030261248.0, adapters = 13631488.0, root = 2.0 * 128256 * 4096 + 4096;
  CHECK(plan.memory.model_state_bytes ==
        Approx((base * 2 + adapters * (2 + 2 + 12) + (base - root) * 2) / 8).epsilon(1e-12));
  double reduced = 0;
  int scatters = 0;
  for (const ShardUnit& u : plan.sharded.units) {
    reduced += u.reduce_bytes;
    scatters += u.reduce_bytes > 0 ? 1 : 0;
  }
  CHECK(scatters == 32);
  CHECK(reduced == Approx((base - root + adapters) * 2));
  CHECK(plan.optimizer.parameters == static_cast<int64_t>(adapters / 8));
  // The program reduce-scatters only those 32 units.
  const StepProgram program = make_step_program(plan);
  int calls = 0;
  for (const CommCall& c : program.classes.front().comms) calls += c.kind == CollectiveKind::reduce_scatter ? 1 : 0;
  CHECK(calls == 32);
}

TEST_CASE("a full fine-tune that does not fit: the advice evaluates LoRA with PEFT's defaults beside the sharding") {
  const Scenario s = load_scenario(src("scenarios/llama3.1-8b-8xl40s.yaml"));
  const StepResult r = estimate(s, make_step_plan(s)).result;
  REQUIRE_FALSE(r.fits);
  const Evaluate evaluate = [](const Scenario& t, const StepPlan& p) { return estimate(t, p).result; };
  const auto advice = advise(s, r, evaluate);
  REQUIRE_FALSE(advice.empty());
  CHECK(advice.front().find("zero3: ") != std::string::npos);
  CHECK(advice.front().find("LoRA (training.trainable: lora, PEFT's defaults: rank 8 on q_proj, v_proj): 3,407,872 "
                            "trainable parameters") != std::string::npos);
  CHECK(advice.front().find("all-reduce 23.86 MB per GPU per step instead of 28.11 GB") != std::string::npos);
  // A LoRA scenario is not offered LoRA again.
  const Scenario lora = lora_scenario({{"cluster.gpu", "RTX-4090"}});
  const StepResult small = estimate(lora, make_step_plan(lora)).result;
  for (const std::string& a : advise(lora, small, evaluate))
    CHECK(a.find("For a fine-tune, LoRA") == std::string::npos);
}

TEST_CASE("QLoRA (lora.base_dtype nf4): the base's linear layers stored in 4 bits, dequantized before each use") {
  const StepPlan bf16 = make_step_plan(lora_scenario());
  const StepPlan nf4 = make_step_plan(lora_scenario({{"lora.base_dtype", "nf4"}}));
  // Llama 3.1 8B's linear layers but the head: 32 x (q + k + v + o + gate + up + down); the embedding, the norms and
  // the head stay bf16. 0.515875 B per weight (data/lora.yaml: 4 bits + QLoRA's double-quantized constants).
  const double linear = 32.0 * (2 * 4096.0 * 4096 + 2 * 4096.0 * 1024 + 3 * 4096.0 * 14336);
  const double rest = 8030261248.0 - linear;
  CHECK(linear == 6979321856.0);
  CHECK(nf4.memory.model_state_bytes == Approx(linear * 0.515875 + rest * 2 + 13631488.0 * 16));
  CHECK(bf16.memory.model_state_bytes - nf4.memory.model_state_bytes == Approx(linear * (2 - 0.515875)));
  // One dequantization per layer forward (read the stored bytes, write bf16), one more in the backward where dX is
  // wanted: every layer but the first block's q, k, v.
  double forward = 0, backward = 0;
  int dequantizations = 0;
  for (const PlanOp& op : nf4.ops) {
    if (!op.name.ends_with(".dequantize")) continue;
    ++dequantizations;
    forward += op.forward_bytes;
    backward += op.backward_bytes;
  }
  CHECK(dequantizations == 7 * 32);
  CHECK(forward == Approx(linear * (0.515875 + 2)));
  const double first_qkv = 4096.0 * 4096 + 2 * 4096.0 * 1024;
  CHECK(backward == Approx((linear - first_qkv) * (0.515875 + 2)));
  CHECK(nf4.trainable_parameters == bf16.trainable_parameters);
  CHECK(nf4.gradient_bytes == bf16.gradient_bytes);
}
