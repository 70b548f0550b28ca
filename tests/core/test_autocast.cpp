// training.compute_dtype (issue 15): torch.autocast on fp32 parameters. The matmuls run at the 16-bit peak on 16-bit
// activations; each matmul's fp32 weights are cast once per forward (and their gradient back), the 16-bit copies held
// until the backward; the residual stream and its norms stay fp32; gradients, DDP's buckets and the optimizer are fp32.
#include <catch2/catch.hpp>
#include <string>

#include "../source_dir.hpp"
#include "dpsim/compute_cost.hpp"
#include "dpsim/error.hpp"
#include "dpsim/estimate.hpp"
#include "dpsim/load.hpp"
#include "dpsim/sweep_spec.hpp"

using namespace dpsim;

namespace {
std::string src(const std::string& rel) { return std::string(DPSIM_SOURCE_DIR) + "/" + rel; }
const std::string kGpt2 = "scenarios/gpt2-124m-4xrtx4090.yaml";
Scenario gpt2(const std::string& param, const std::string& compute) {
  return load_scenario(
      src(kGpt2),
      {{"training.param_dtype", param}, {"training.grad_dtype", param}, {"training.compute_dtype", compute}});
}
StepResult memory_of(const Scenario& s) {
  StepResult r;
  fill_common(s, make_step_plan(s), r);
  return r;
}
const PlanOp* find_op(const StepPlan& p, const std::string& name) {
  for (const PlanOp& op : p.ops)
    if (op.name == name) return &op;
  return nullptr;
}
}  // namespace

TEST_CASE("autocast: matmuls at the compute dtype's peak, fp32 gradients and model state") {
  const Scenario ac = gpt2("fp32", "bf16"), bf = gpt2("bf16", "bf16"), fp = gpt2("fp32", "fp32");
  CHECK(ac.training.autocast());
  CHECK_FALSE(bf.training.autocast());
  CHECK(compute_model(ac).peak_flops_per_s == compute_model(bf).peak_flops_per_s);
  CHECK(compute_model(ac).element_bytes == 2);
  const StepPlan pa = make_step_plan(ac), pf = make_step_plan(fp);
  CHECK(pa.gradient_bytes == 4 * pa.trainable_parameters);                    // DDP all-reduces fp32 gradients
  CHECK(pa.memory.model_state_bytes == Approx(pf.memory.model_state_bytes));  // fp32 weights, no master copy
  CHECK(pa.memory.ddp_buffer_bytes == Approx(pf.memory.ddp_buffer_bytes));
}

TEST_CASE("autocast: each matmul's weights cast once per forward and back in its backward, the copy held") {
  const Scenario ac = gpt2("fp32", "bf16");
  const StepPlan p = make_step_plan(ac);
  const ModelSpec& m = ac.model;
  const double d = static_cast<double>(m.transformer->hidden_size);
  // h.0.attn.c_attn: d x 3d weight + 3d bias; cast reads 4 and writes 2 bytes per element each way.
  const PlanOp* cast = find_op(p, "h.0.attn.c_attn.autocast_weight");
  REQUIRE(cast != nullptr);
  CHECK(cast->forward_bytes == Approx((3 * d * d + 3 * d) * 6));
  CHECK(cast->backward_bytes == Approx((3 * d * d + 3 * d) * 6));
  // The tied head owns no tensor, but autocast casts the embedding it multiplies by: V x d.
  const PlanOp* head = find_op(p, "lm_head.autocast_weight");
  REQUIRE(head != nullptr);
  CHECK(head->forward_bytes == Approx(static_cast<double>(m.transformer->vocab_size) * d * 6));
  // The copies: 2 bytes for every matmul weight (the head's V x d included), in the memory total.
  double matmul_weights = static_cast<double>(m.transformer->vocab_size) * d;
  for (const PlanOp& op : p.ops)
    if (op.name.ends_with(".autocast_weight") && op.name != "lm_head.autocast_weight")
      matmul_weights += op.forward_bytes / 6;
  CHECK(p.memory.weight_copy_bytes == Approx(2 * matmul_weights));
  const StepResult r = memory_of(ac);
  CHECK(r.weight_copy_bytes_per_gpu == Approx(p.memory.weight_copy_bytes));
  CHECK(r.memory_need_bytes() ==
        Approx(r.model_state_bytes_per_gpu + r.activation_bytes_per_gpu + r.ddp_buffer_bytes_per_gpu +
               r.weight_copy_bytes_per_gpu + r.runtime_bytes_per_gpu()));
  // No autocast: no cast op, no copies.
  const StepPlan plain = make_step_plan(gpt2("bf16", "bf16"));
  CHECK(find_op(plain, "h.0.attn.c_attn.autocast_weight") == nullptr);
  CHECK(plain.memory.weight_copy_bytes == 0);
}

TEST_CASE("autocast: the residual stream and its norms in fp32, each matmul casting and keeping its input") {
  const Scenario ac = gpt2("fp32", "bf16"), bf = gpt2("bf16", "bf16");
  const StepPlan pa = make_step_plan(ac), pb = make_step_plan(bf);
  const double mb = static_cast<double>(ac.training.micro_batch);
  const double s = static_cast<double>(ac.training.sequence_length);
  const double d = static_cast<double>(ac.model.transformer->hidden_size);
  const double L = static_cast<double>(ac.model.transformer->num_layers);
  // A norm moves 4-byte elements instead of 2.
  CHECK(find_op(pa, "h.0.ln_1")->forward_bytes == Approx(2 * find_op(pb, "h.0.ln_1")->forward_bytes));
  // The residual add reads fp32 + bf16 and writes fp32: 10 bytes per element instead of 6.
  CHECK(find_op(pa, "h.0.attn_residual")->forward_bytes ==
        Approx(10.0 / 6.0 * find_op(pb, "h.0.attn_residual")->forward_bytes));
  // c_attn and c_fc cast the normed fp32 input: read 4, write 2 per element.
  REQUIRE(find_op(pa, "h.0.attn.c_attn.autocast_input") != nullptr);
  CHECK(find_op(pa, "h.0.attn.c_attn.autocast_input")->forward_bytes == Approx(mb * s * d * 6));
  CHECK(find_op(pb, "h.0.attn.c_attn.autocast_input") == nullptr);
  // Saved: each block's two norms and the final norm keep an fp32 input (2 more bytes per element); the matmuls keep
  // 16-bit casts, as without autocast (GPT-2's fused c_attn: one cast per block input).
  CHECK(pa.memory.activation_bytes - pb.memory.activation_bytes == Approx((2 * L + 1) * 2 * mb * s * d));
}

TEST_CASE("autocast: separate q, k, v and gate, up projections each keep their own 16-bit copy") {
  const auto llama = [](const std::string& param, const std::string& compute) {
    return load_scenario(src("scenarios/llama3.1-8b-8xh100.yaml"), {{"training.param_dtype", param},
                                                                    {"training.grad_dtype", param},
                                                                    {"training.compute_dtype", compute},
                                                                    {"training.micro_batch", "1"},
                                                                    {"training.activation_checkpointing", "none"}});
  };
  const Scenario ac = llama("fp32", "bf16"), bf = llama("bf16", "bf16");
  const double s = static_cast<double>(ac.training.sequence_length);
  const double d = static_cast<double>(ac.model.transformer->hidden_size);
  const double L = static_cast<double>(ac.model.transformer->num_layers);
  // Per block: two fp32 norm inputs (+2 bytes each) and k_proj, v_proj, up_proj's own copies (+2 bytes each), and the
  // final norm's fp32 input.
  CHECK(make_step_plan(ac).memory.activation_bytes - make_step_plan(bf).memory.activation_bytes ==
        Approx((5 * L + 1) * 2 * s * d));
}

TEST_CASE("autocast: a combination it does not model is refused") {
  CHECK_THROWS_AS(load_scenario(src(kGpt2), {{"training.param_dtype", "fp32"},
                                             {"training.grad_dtype", "fp32"},
                                             {"training.compute_dtype", "bf16"},
                                             {"parallelism.sharding", "zero2"}}),
                  InputError);
}
