#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "../source_dir.hpp"
#include "dpsim/compute_cost.hpp"
#include "dpsim/load.hpp"
#include "dpsim/model.hpp"
#include "dpsim/plan.hpp"
#include "dpsim/sweep_spec.hpp"

using namespace dpsim;

namespace {
std::string src(const std::string& rel) { return std::string(DPSIM_SOURCE_DIR) + "/" + rel; }
constexpr int64_t MiB = 1024 * 1024;
}  // namespace

TEST_CASE("DDP bucket assignment: first bucket 1 MiB, then the cap; the crossing tensor stays in") {
  // ready-order sizes: 0.5 MiB, 0.75 MiB (crosses 1 MiB -> close), 10, 10, 10 (crosses 25 -> close), 3
  const auto b = assign_buckets({MiB / 2, 3 * MiB / 4, 10 * MiB, 10 * MiB, 10 * MiB, 3 * MiB}, 1.0 * MiB, 25.0 * MiB);
  REQUIRE(b.size() == 3);
  CHECK(b[0] == std::vector<int>{0, 1});
  CHECK(b[1] == std::vector<int>{2, 3, 4});
  CHECK(b[2] == std::vector<int>{5});
}

TEST_CASE("a tensor above the cap gets a bucket of its own") {
  const auto b = assign_buckets({2 * MiB, 100 * MiB, 1 * MiB, 30 * MiB}, 1.0 * MiB, 25.0 * MiB);
  REQUIRE(b.size() == 3);
  CHECK(b[0] == std::vector<int>{0});
  CHECK(b[1] == std::vector<int>{1});
  CHECK(b[2] == std::vector<int>{2, 3});
}

TEST_CASE("Llama 3.1 8B on 8 GPUs: 162 buckets, lm_head first, input embedding last") {
  const Scenario s = load_scenario(src("scenarios/llama3.1-8b-8xh100.yaml"));
  const StepPlan plan = make_step_plan(s);
  REQUIRE(plan.buckets.size() == 162);
  const auto& first = plan.buckets.front();
  REQUIRE(first.grads.size() == 1);
  CHECK(plan.grads[static_cast<size_t>(first.grads[0])].name == "lm_head.weight");
  const auto& last = plan.buckets.back();  // [layers.0.input_layernorm + embed_tokens]
  REQUIRE(last.grads.size() == 2);
  CHECK(plan.grads[static_cast<size_t>(last.grads[1])].name == "embed_tokens.weight");
  // [final_norm + down31], [up31], [gate31], [norm2 + o31], [v + k + q31], [norm1_31 + down30]
  auto names = [&](size_t b) {
    std::vector<std::string> out;
    for (int g : plan.buckets[b].grads) out.push_back(plan.grads[static_cast<size_t>(g)].name);
    return out;
  };
  CHECK(names(1) == std::vector<std::string>{"norm.weight", "layers.31.mlp.down_proj.weight"});
  CHECK(names(2) == std::vector<std::string>{"layers.31.mlp.up_proj.weight"});
  CHECK(names(3) == std::vector<std::string>{"layers.31.mlp.gate_proj.weight"});
  CHECK(names(4) ==
        std::vector<std::string>{"layers.31.post_attention_layernorm.weight", "layers.31.self_attn.o_proj.weight"});
  CHECK(names(5) == std::vector<std::string>{"layers.31.self_attn.v_proj.weight", "layers.31.self_attn.k_proj.weight",
                                             "layers.31.self_attn.q_proj.weight"});
  CHECK(names(6) == std::vector<std::string>{"layers.31.input_layernorm.weight", "layers.30.mlp.down_proj.weight"});
  int64_t total = 0;
  for (const auto& b : plan.buckets) total += b.bytes;
  CHECK(total == plan.gradient_bytes);
  // Ready positions never go backwards: buckets launch strictly in order.
  for (size_t i = 1; i < plan.buckets.size(); ++i)
    CHECK(plan.buckets[i].ready_after_backward_op >= plan.buckets[i - 1].ready_after_backward_op);
}

TEST_CASE("iteration 0 uses one bucket for everything") {
  Scenario s = load_scenario(src("scenarios/llama3.1-8b-8xh100.yaml"));
  s.ddp.first_iteration = true;
  const StepPlan plan = make_step_plan(s);
  REQUIRE(plan.buckets.size() == 1);
  CHECK(plan.buckets[0].bytes == plan.gradient_bytes);
  CHECK(plan.buckets[0].ready_after_backward_op == static_cast<int>(plan.ops.size()) - 1);
}

TEST_CASE("model state per parameter by optimizer and precision") {
  CHECK(model_state_bytes_per_parameter(Dtype::bf16, Dtype::bf16, Optimizer::adamw, true) == 16);
  CHECK(model_state_bytes_per_parameter(Dtype::fp32, Dtype::fp32, Optimizer::adamw, true) == 16);
  CHECK(model_state_bytes_per_parameter(Dtype::bf16, Dtype::bf16, Optimizer::sgd_momentum, true) == 12);
  CHECK(model_state_bytes_per_parameter(Dtype::fp32, Dtype::fp32, Optimizer::sgd, true) == 8);
  // Pure 16-bit (training.master_weights false): no fp32 copy, the moments in the weights' dtype (torch.zeros_like).
  CHECK(model_state_bytes_per_parameter(Dtype::bf16, Dtype::bf16, Optimizer::adamw, false) == 8);
  CHECK(model_state_bytes_per_parameter(Dtype::bf16, Dtype::bf16, Optimizer::sgd_momentum, false) == 6);
  CHECK(model_state_bytes_per_parameter(Dtype::fp32, Dtype::fp32, Optimizer::adamw, false) == 16);  // fp32: no change
}

TEST_CASE("optimizer traffic per parameter as PyTorch's implementations move it") {
  // fused AdamW, bf16 weights: read master, m, v (12) and the grad (2), write master, m, v (12) and the weight (2).
  CHECK(optimizer_bytes_per_parameter(Optimizer::adamw, OptimizerImpl::fused, Dtype::bf16, Dtype::bf16, true) == 28);
  CHECK(optimizer_bytes_per_parameter(Optimizer::adamw, OptimizerImpl::fused, Dtype::fp32, Dtype::fp32, true) == 28);
  // foreach AdamW: 18 fp32 passes + 2 grad passes + the master -> bf16 copy (4 + 2).
  CHECK(optimizer_bytes_per_parameter(Optimizer::adamw, OptimizerImpl::foreach, Dtype::bf16, Dtype::bf16, true) == 82);
  CHECK(optimizer_bytes_per_parameter(Optimizer::adamw, OptimizerImpl::forloop, Dtype::fp32, Dtype::fp32, true) == 80);
  CHECK(optimizer_bytes_per_parameter(Optimizer::sgd_momentum, OptimizerImpl::fused, Dtype::bf16, Dtype::bf16, true) ==
        20);
  CHECK(optimizer_bytes_per_parameter(Optimizer::sgd_momentum, OptimizerImpl::foreach, Dtype::fp32, Dtype::fp32,
                                      true) == 32);
  CHECK(optimizer_bytes_per_parameter(Optimizer::sgd, OptimizerImpl::fused, Dtype::bf16, Dtype::bf16, true) == 12);
  // Launches: foreach and fused once per group, forloop once per tensor.
  CHECK(optimizer_kernels(Optimizer::adamw, OptimizerImpl::foreach, Dtype::fp32, 291, true) == 9);
  CHECK(optimizer_kernels(Optimizer::adamw, OptimizerImpl::forloop, Dtype::fp32, 291, true) == 9 * 291);
  CHECK(optimizer_kernels(Optimizer::adamw, OptimizerImpl::fused, Dtype::bf16, 291, true) == 2);
  // Pure bf16: the same passes over 2-byte weights and moments, no master copy pass.
  CHECK(optimizer_bytes_per_parameter(Optimizer::adamw, OptimizerImpl::fused, Dtype::bf16, Dtype::bf16, false) == 14);
  CHECK(optimizer_bytes_per_parameter(Optimizer::adamw, OptimizerImpl::foreach, Dtype::bf16, Dtype::bf16, false) == 40);
  CHECK(optimizer_kernels(Optimizer::adamw, OptimizerImpl::foreach, Dtype::bf16, 291, true) == 10);
  CHECK(optimizer_kernels(Optimizer::adamw, OptimizerImpl::foreach, Dtype::bf16, 291, false) == 9);
}

TEST_CASE("the plan's optimizer step follows training.optimizer_impl, foreach by default") {
  Scenario s = load_scenario(src("scenarios/llama3.1-8b-8xh100.yaml"));
  const StepPlan foreach_plan = make_step_plan(s);
  s.training.optimizer_impl = OptimizerImpl::fused;
  const StepPlan fused_plan = make_step_plan(s);
  CHECK(foreach_plan.optimizer.bytes > 2.9 * fused_plan.optimizer.bytes);
  CHECK(foreach_plan.optimizer.tensors == static_cast<int64_t>(foreach_plan.grads.size()));
  const ComputeModel cm = compute_model(s);
  CHECK(optimizer_seconds(foreach_plan.optimizer, cm) > optimizer_seconds(fused_plan.optimizer, cm));
}

namespace {
Scenario mpt_125m(const std::string& checkpointing) {
  return load_scenario(src("validation/reference/scenarios/e2e/a100-40-mpt125m-s2048-g8-gbs624.yaml"),
                       {{"training.activation_checkpointing", checkpointing}});
}
}  // namespace

TEST_CASE("activation_checkpointing full keeps each block's input and one block's activations") {
  const Scenario none = mpt_125m("none"), full = mpt_125m("full");
  const StepPlan a = make_step_plan(none), b = make_step_plan(full);
  // MPT-125m: 12 blocks (h.0 .. h.11) of hidden 768, micro-batch 26 x 2048 tokens, bf16 activations.
  const double mb = 26, input = 2048.0 * 768 * 2;
  double outside = 0, block = 0;
  for (const auto& op : build_ops(none.model, 2048, Dtype::bf16)) {
    if (op.name.rfind("h.", 0) == 0)
      block += op.activation_bytes_per_sample;
    else
      outside += op.activation_bytes_per_sample;
  }
  CHECK(a.memory.activation_bytes == Approx((outside + block) * mb));
  CHECK(b.memory.activation_bytes == Approx((outside + 12 * input + block / 12) * mb));
  CHECK(b.memory.activation_bytes < a.memory.activation_bytes);  // the fp32 logits of the loss stay
}

TEST_CASE("activation_checkpointing full adds each block's forward to its backward, and nothing else") {
  const StepPlan a = make_step_plan(mpt_125m("none")), b = make_step_plan(mpt_125m("full"));
  const ComputeModel m = compute_model(mpt_125m("none"));
  REQUIRE(a.ops.size() == b.ops.size());
  int recomputed = 0;
  for (size_t i = 0; i < a.ops.size(); ++i) {
    const bool in_block = a.ops[i].name.rfind("h.", 0) == 0;
    CHECK(b.ops[i].recompute_forward == in_block);
    CHECK(forward_seconds(b.ops[i], m) == forward_seconds(a.ops[i], m));
    const double extra = in_block ? forward_seconds(a.ops[i], m) : 0.0;
    CHECK(backward_seconds(b.ops[i], m) == Approx(backward_seconds(a.ops[i], m) + extra));
    recomputed += in_block ? 1 : 0;
  }
  CHECK(recomputed == 12 * 10);  // ln_1, c_attn, core, c_proj, the residual, ln_2, c_fc, act, c_proj, the residual
}

TEST_CASE("activation_checkpointing selective reruns each block's attention core, which keeps only q, k and v") {
  const Scenario none = mpt_125m("none"), selective = mpt_125m("selective");
  const StepPlan a = make_step_plan(none), b = make_step_plan(selective);
  const ComputeModel m = compute_model(none);
  REQUIRE(a.ops.size() == b.ops.size());
  int recomputed = 0;
  for (size_t i = 0; i < a.ops.size(); ++i) {
    const bool core = a.ops[i].kind == OpKind::attention;
    CHECK(b.ops[i].recompute_forward == core);
    const double extra = core ? forward_seconds(a.ops[i], m) : 0.0;
    CHECK(backward_seconds(b.ops[i], m) == Approx(backward_seconds(a.ops[i], m) + extra));
    recomputed += core ? 1 : 0;
  }
  CHECK(recomputed == 12);
  // MPT-125m (flash1): each core keeps q, k, v but not its output, 2048 x 768 bf16 per sample; one core's output
  // exists again while it reruns. Micro-batch 26.
  const double mb = 26, out = 2048.0 * 768 * 2;
  CHECK(b.memory.activation_bytes == Approx(a.memory.activation_bytes - 12 * out * mb + out * mb));
}

TEST_CASE("eager attention keeps 6 bytes per score element for its backward; selective recomputation drops them") {
  const auto eager = [](const std::string& checkpointing) {
    return load_scenario(src("validation/reference/scenarios/e2e/a100-40-mpt125m-s2048-g8-gbs624.yaml"),
                         {{"training.activation_checkpointing", checkpointing}, {"training.attention", "eager"}});
  };
  const StepPlan flash = make_step_plan(mpt_125m("none"));
  const StepPlan none = make_step_plan(eager("none")), selective = make_step_plan(eager("selective"));
  const StepPlan full = make_step_plan(eager("full"));
  // MPT-125m: 12 heads, 2048 x 2048 scores per head, micro-batch 26, 12 layers; the fp32 softmax output and the bf16
  // probabilities the matmul reads (data/gpus.yaml eager_attention_bytes_per_score saved: 6).
  const double scores_per_layer = 12.0 * 2048 * 2048 * 26 * 6;
  CHECK(none.memory.activation_bytes == Approx(flash.memory.activation_bytes + 12 * scores_per_layer));
  // Selective keeps no layer's scores except the one core rerunning.
  const double out = 2048.0 * 768 * 2 * 26;
  CHECK(selective.memory.activation_bytes == Approx(flash.memory.activation_bytes - 12 * out + out + scores_per_layer));
  CHECK(full.memory.activation_bytes < selective.memory.activation_bytes);
}

TEST_CASE("eager attention with dropout keeps 7 bytes per score element, eager_16bit 5") {
  // Megatron-LM 2019's 1.2B (attention_dropout 0.1), no recomputation: HF's eager keeps the fp32 softmax output, the
  // dropout's 16-bit output and its mask (6 + 1); eager_16bit the 16-bit softmax output, the dropout's output and
  // its mask (2 + 3) (data/gpus.yaml eager_attention_bytes_per_score).
  const auto plan = [](const std::string& attention) {
    return make_step_plan(
        load_scenario(src("scenarios/megatron-1.2b-1xv100.yaml"),
                      {{"training.activation_checkpointing", "none"}, {"training.attention", attention}}));
  };
  const double scores = 40.0 * 16 * 1024 * 1024 * 8;  // 40 layers of 16 heads, 1024 x 1024, micro-batch 8
  CHECK(plan("eager").memory.activation_bytes == Approx(plan("eager_16bit").memory.activation_bytes + scores * 2));
  CHECK(plan("eager").memory.activation_bytes == Approx(plan("flash").memory.activation_bytes + scores * 7));
}

TEST_CASE("activation_checkpointing_every N checkpoints blocks N-1, 2N-1, ... and keeps the others' activations") {
  const Scenario every3 =
      load_scenario(src("validation/reference/scenarios/e2e/a100-40-mpt125m-s2048-g8-gbs624.yaml"),
                    {{"training.activation_checkpointing", "full"}, {"training.activation_checkpointing_every", "3"}});
  const StepPlan none = make_step_plan(mpt_125m("none")), full = make_step_plan(mpt_125m("full"));
  const StepPlan b = make_step_plan(every3);
  int recomputed = 0;
  for (const PlanOp& op : b.ops) {
    const bool in_block = op.name.rfind("h.", 0) == 0;
    const int block = in_block ? std::stoi(op.name.substr(2)) : -1;
    CHECK(op.recompute_forward == (block == 2 || block == 5 || block == 8 || block == 11));
    recomputed += op.recompute_forward ? 1 : 0;
  }
  CHECK(recomputed == 4 * 10);
  // Four of twelve blocks keep only their input: a third of the way from none to full, plus the one block that
  // recomputes (the same in both).
  const double a = none.memory.activation_bytes, f = full.memory.activation_bytes;
  double block = 0;
  for (const auto& op : build_ops(every3.model, 2048, Dtype::bf16))
    if (op.name.rfind("h.0.", 0) == 0) block += op.activation_bytes_per_sample;
  const double mb = 26, input = 2048.0 * 768 * 2;
  CHECK(b.memory.activation_bytes == Approx(a - 4 * (block - input) * mb + block * mb));
  CHECK(f < b.memory.activation_bytes);
  CHECK(b.memory.activation_bytes < a);
}

namespace {
Scenario llama_8b_fsdp(const std::string& checkpointing, const std::string& elementwise = "fused") {
  return load_scenario(src("scenarios/llama3.1-8b-fsdp-8xh100.yaml"),
                       {{"training.activation_checkpointing", checkpointing}, {"training.elementwise", elementwise}});
}
}  // namespace

TEST_CASE("activation_checkpointing selective_op (torchtitan's op SAC) keeps the SDPA and every other mm of a block") {
  const Scenario none = llama_8b_fsdp("none"), op_level = llama_8b_fsdp("selective_op");
  const StepPlan a = make_step_plan(none), b = make_step_plan(op_level);
  const ComputeModel m = compute_model(none);
  REQUIRE(a.ops.size() == b.ops.size());
  // A Llama block's bias-free linears run aten.mm in the order q, k, v, o, gate, up, down: the 1st, 3rd, 5th and
  // 7th are saved (q, v, gate, down), the 2nd, 4th and 6th rerun (k, o, up), and so does every op not in
  // torchtitan's _save_list (the norms, SwiGLU, the residual adds). Outside the blocks nothing reruns.
  const std::vector<std::string> saved = {"q_proj", "v_proj", "self_attn.core", "gate_proj", "down_proj"};
  int recomputed = 0, kept = 0;
  for (size_t i = 0; i < a.ops.size(); ++i) {
    const std::string& name = a.ops[i].name;
    INFO(name);
    const bool in_block = name.rfind("layers.", 0) == 0;
    const bool is_saved = std::any_of(saved.begin(), saved.end(), [&](const auto& t) { return name.ends_with(t); });
    CHECK(b.ops[i].recompute_forward == (in_block && !is_saved));
    const double extra = b.ops[i].recompute_forward ? forward_seconds(a.ops[i], m) : 0.0;
    CHECK(backward_seconds(b.ops[i], m) == Approx(backward_seconds(a.ops[i], m) + extra));
    recomputed += b.ops[i].recompute_forward ? 1 : 0;
    kept += in_block && is_saved ? 1 : 0;
  }
  CHECK(kept == 32 * 5);
  CHECK(recomputed > 32 * 3);  // k, o, up and the block's memory-bound ops
  // Memory: the ops outside the blocks keep theirs; each block keeps its input (2048 x 4096 bf16 per sample) and the
  // results it caches: q (4096 wide), v (1024), gate (14336), down (4096), the attention's output (4096) and its fp32
  // log-sum-exp (32 heads); one block's own activations exist again while it reruns, or, larger here, the loss
  // backward's two fp32 tensors of the logits' size (training.cross_entropy torch, the default). Micro-batch 1.
  const std::vector<Op> ops = build_ops(none.model, 2048, Dtype::bf16);
  double outside = 0, block0 = 0;
  for (const Op& op : ops) {
    if (op.name.rfind("layers.", 0) != 0)
      outside += op.activation_bytes_per_sample;
    else if (op.name.rfind("layers.0.", 0) == 0)
      block0 += op.activation_bytes_per_sample;
  }
  const double tokens = 2048, cached = tokens * (4096 + 1024 + 14336 + 4096 + 4096) * 2 + tokens * 32 * 4;
  const double input = tokens * 4096 * 2;
  const double loss_backward = 2.0 * tokens * 128256 * 4;
  CHECK(loss_backward > block0);
  CHECK(b.memory.activation_bytes == Approx(outside + 32 * (input + cached) + loss_backward));
  CHECK(b.memory.activation_bytes < make_step_plan(llama_8b_fsdp("selective")).memory.activation_bytes);
  CHECK(b.memory.activation_bytes > make_step_plan(llama_8b_fsdp("full")).memory.activation_bytes);
}

TEST_CASE("selective_op reruns a linear with a bias (aten.addmm) and does not count it as an mm") {
  // GPT-2's linears carry biases: no op of a block is saved except the attention core.
  const StepPlan p = make_step_plan(load_scenario(src("scenarios/gpt2-1.5b-16xh100-ib.yaml"),
                                                  {{"training.activation_checkpointing", "selective_op"}}));
  for (const PlanOp& op : p.ops) {
    INFO(op.name);
    if (op.name.rfind("h.", 0) == 0) CHECK(op.recompute_forward == !op.name.ends_with("attn.core"));
  }
}

TEST_CASE("training.master_weights false: pure bf16 holds 8 B per AdamW parameter and steps over 2-byte tensors") {
  const Scenario mixed = load_scenario(src("scenarios/llama3.1-8b-8xh100.yaml"));
  const Scenario pure = load_scenario(src("scenarios/llama3.1-8b-8xh100.yaml"), {{"training.master_weights", "false"}});
  CHECK(mixed.training.master_weights);
  CHECK_FALSE(pure.training.master_weights);
  const StepPlan a = make_step_plan(mixed), b = make_step_plan(pure);
  const auto params = static_cast<double>(a.optimizer.parameters);
  CHECK(a.memory.model_state_bytes == Approx(16.0 * params));
  CHECK(b.memory.model_state_bytes == Approx(8.0 * params));  // 2 weights + 2 gradients + 2 x 2 moments
  // foreach AdamW: 18 passes at 4 B + 2 gradient passes + the master -> bf16 copy (82 B) against 18 x 2 + 2 x 2 (40 B)
  CHECK(a.optimizer.bytes == Approx(82.0 * params));
  CHECK(b.optimizer.bytes == Approx(40.0 * params));
  CHECK(b.optimizer.kernels == a.optimizer.kernels - 1);  // no master copy pass
  // Under FSDP the sharded state is the pure one too.
  const Scenario pure_fsdp = load_scenario(src("scenarios/llama3.1-8b-8xh100.yaml"),
                                           {{"training.master_weights", "false"}, {"parallelism.sharding", "zero3"}});
  CHECK(make_step_plan(pure_fsdp).memory.model_state_bytes == Approx(8.0 * params / 8));
}
