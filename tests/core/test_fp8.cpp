// training.fp8: the linear layers' GEMMs at the GPU's FP8 rate, with Transformer Engine's casts around each.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>

#include "../source_dir.hpp"
#include "dpsim/compute_cost.hpp"
#include "dpsim/fp8.hpp"
#include "dpsim/load.hpp"
#include "dpsim/plan.hpp"
#include "dpsim/sweep_spec.hpp"

using namespace dpsim;

namespace {

Scenario llama8b(bool fp8) {
  return load_scenario(std::filesystem::path(DPSIM_SOURCE_DIR) / "scenarios/llama3.1-8b-8xh100.yaml",
                       {{"training.fp8", fp8 ? "true" : "false"}});
}

int index_of(const StepPlan& p, const std::string& name) {
  for (size_t i = 0; i < p.ops.size(); ++i)
    if (p.ops[i].name == name) return static_cast<int>(i);
  return -1;
}

}  // namespace

TEST_CASE("training.fp8: FP8 GEMMs for the linear layers, casts around each, the vocabulary head in 16 bits") {
  const Scenario s = llama8b(true), plain = llama8b(false);
  const StepPlan p = make_step_plan(s), q = make_step_plan(plain);
  const int proj = index_of(p, "layers.0.self_attn.q_proj");
  REQUIRE(proj > 0);
  CHECK(p.ops[static_cast<size_t>(proj)].fp8);
  // before it, the forward's casts of its input and weight; after it, the output gradient's cast (which the backward
  // reaches first)
  CHECK(p.ops[static_cast<size_t>(proj - 1)].name == "layers.0.self_attn.q_proj.fp8_casts");
  CHECK(p.ops[static_cast<size_t>(proj + 1)].name == "layers.0.self_attn.q_proj.fp8_grad_cast");
  // the micro-batch's tokens x 4,096 in, 4,096 x 4,096 weights, tokens x 4,096 out: read 2 bytes, write the FP8 copy
  // and its transpose (1 + 1) per element
  const double tokens = static_cast<double>(s.training.sequence_length * s.training.micro_batch), d = 4096;
  CHECK(p.ops[static_cast<size_t>(proj - 1)].forward_bytes == Approx((tokens * d + d * d) * 4));
  CHECK(p.ops[static_cast<size_t>(proj - 1)].backward_bytes == 0);
  CHECK(p.ops[static_cast<size_t>(proj + 1)].forward_bytes == 0);
  CHECK(p.ops[static_cast<size_t>(proj + 1)].backward_bytes == Approx(tokens * d * 4));
  // the head: no casts, 16 bits
  const int head = index_of(p, "lm_head");
  REQUIRE(head > 0);
  CHECK_FALSE(p.ops[static_cast<size_t>(head)].fp8);
  CHECK(index_of(p, "lm_head.fp8_casts") < 0);
  // without fp8 nothing is added: two cast ops per linear layer but the head (7 a block)
  CHECK(index_of(q, "layers.0.self_attn.q_proj.fp8_casts") < 0);
  CHECK(p.ops.size() == q.ops.size() + 2 * 7 * 32);
  // the GEMMs: FP8's peak x its MAMF share against bf16's (1979 x 0.734 over 989 x 0.80, the same tiles), less the
  // fixed time per kernel
  const ComputeModel m = compute_model(s), b = compute_model(plain);
  const double fp8_s = forward_seconds(p.ops[static_cast<size_t>(proj)], m);
  const double bf16_s = forward_seconds(q.ops[static_cast<size_t>(index_of(q, "layers.0.self_attn.q_proj"))], b);
  CHECK(bf16_s / fp8_s == Approx(1979.0 * 0.734 / (989.0 * 0.80)).epsilon(0.06));
  CHECK(bf16_s / fp8_s < 1979.0 * 0.734 / (989.0 * 0.80));
}

TEST_CASE("training.fp8: each FP8 linear layer keeps the FP8 copy of its input for its weight gradient, not 16 bits") {
  const Scenario s = llama8b(true);
  const std::vector<Op> plain = build_ops(s.model, s.training.sequence_length, s.training.compute());
  const std::vector<Op> fp8 = with_fp8_casts(plain, s.training);
  // Transformer Engine's Linear saves its quantized input with only the column-wise FP8 data (linear.py:616-621):
  // 1 byte per element where the bf16 input was 2; the head, not in FP8, keeps its bf16 input.
  for (const Op& f : fp8) {
    const auto same = std::find_if(plain.begin(), plain.end(), [&](const Op& p) { return p.name == f.name; });
    if (same == plain.end()) continue;  // a cast op
    if (f.fp8)
      CHECK(f.activation_bytes_per_sample == Approx(same->activation_bytes_per_sample / 2));
    else
      CHECK(f.activation_bytes_per_sample == same->activation_bytes_per_sample);
  }
  CHECK(make_step_plan(s).memory.activation_bytes < make_step_plan(llama8b(false)).memory.activation_bytes);
}

TEST_CASE("training.fp8: an FP8 linear layer's sequence-parallel all-gathers move its FP8 copies, 1 byte an element") {
  const Scenario s = llama8b(true);
  const std::vector<Op> plain = build_ops(s.model, s.training.sequence_length, s.training.compute(), {8, true});
  const std::vector<Op> fp8 = with_fp8_casts(plain, s.training);
  // Transformer Engine quantizes before it gathers (linear.py :398-411, :993-998, :1156-1160): the all-gathers of the
  // input (forward and again in the backward) and of the output gradient carry 1 byte per element; the
  // reduce-scatters stay in bf16, and the head (not in FP8) gathers in bf16.
  int gathers = 0;
  for (const Op& f : fp8) {
    const auto same = std::find_if(plain.begin(), plain.end(), [&](const Op& p) { return p.name == f.name; });
    if (same == plain.end()) continue;  // a cast op
    REQUIRE(f.tensor_comms.size() == same->tensor_comms.size());
    for (size_t i = 0; i < f.tensor_comms.size(); ++i) {
      const bool halved = f.fp8 && f.tensor_comms[i].kind == CollectiveKind::all_gather;
      gathers += halved ? 1 : 0;
      CHECK(f.tensor_comms[i].bytes_per_sample ==
            Approx(same->tensor_comms[i].bytes_per_sample * (halved ? 0.5 : 1.0)));
    }
  }
  // per block: qkv's and the gate/up linear's gather and re-gather, o_proj's and down_proj's output-gradient gather
  CHECK(gathers == 6 * 32);
}
