// Megatron-LM tensor parallelism as users rely on it: what one GPU of a tensor group of t holds and computes
// (Shoeybi et al. 2019, arXiv 1909.08053, Section 3), the collectives around each block with and without sequence
// parallelism (Korthikanti et al. 2022, arXiv 2205.05198, Section 4.2.2), the activation bytes against Korthikanti's
// per-layer terms, and the plan and program of a scenario with parallelism.tensor: 8.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "../source_dir.hpp"
#include "dpsim/load.hpp"
#include "dpsim/model.hpp"
#include "dpsim/plan.hpp"
#include "dpsim/program.hpp"
#include "dpsim/sweep_spec.hpp"

using namespace dpsim;

namespace {

std::string src(const std::string& rel) { return std::string(DPSIM_SOURCE_DIR) + "/" + rel; }

int64_t div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::map<std::string, int64_t> param_numels(const std::vector<Op>& ops) {
  std::map<std::string, int64_t> out;
  for (const Op& op : ops)
    for (const ParamTensor& p : op.params) out[p.name] = p.numel;
  return out;
}

int64_t total_params(const std::vector<Op>& ops) {
  int64_t n = 0;
  for (const Op& op : ops)
    for (const ParamTensor& p : op.params) n += p.numel;
  return n;
}

// What stays whole on every GPU of the tensor group: norm weights and biases, the biases of row-parallel layers
// (added after the reduction: RowParallelLinear's bias is not split) and the position embedding.
bool replicated(const std::string& name) {
  return name.find("norm") != std::string::npos || name.find("ln_") != std::string::npos || name == "wpe.weight" ||
         (starts_with(name, "h.") && ends_with(name, "c_proj.bias"));
}

// The tensor collectives of the ops whose names start with `prefix`, as (op suffix, kind, backward, before).
struct Placed {
  std::string op;
  CollectiveKind kind;
  bool backward;
  bool before;
  double bytes;
};
std::vector<Placed> comms_of(const std::vector<Op>& ops, const std::string& prefix) {
  std::vector<Placed> out;
  for (const Op& op : ops) {
    if (!starts_with(op.name, prefix)) continue;
    for (const TensorComm& c : op.tensor_comms)
      out.push_back({op.name.substr(prefix.size()), c.kind, c.backward, c.before, c.bytes_per_sample});
  }
  return out;
}

double layer_activation_bytes(const std::vector<Op>& ops, const std::string& prefix) {
  double bytes = 0;
  for (const Op& op : ops)
    if (starts_with(op.name, prefix)) bytes += op.activation_bytes_per_sample;
  return bytes;
}

}  // namespace

TEST_CASE("tensor parallelism, Llama 3.1 8B: each GPU holds 1/t of the split tensors and the whole norms") {
  const ModelSpec m = load_model(src("models/llama-3.1-8b.yaml"));
  const int64_t V = 128256, d = 4096, L = 32, KV = 8, hd = 128, ff = 14336;
  const auto whole = param_numels(build_ops(m, 2048, Dtype::bf16));
  for (const int t : {2, 4, 8}) {
    INFO("t = " << t);
    const auto ops = build_ops(m, 2048, Dtype::bf16, {t, false});
    const auto local = param_numels(ops);
    REQUIRE(local.size() == whole.size());
    int64_t split_local = 0, replicated_sum = 0;
    for (const auto& [name, numel] : whole) {
      INFO(name);
      REQUIRE(local.count(name) == 1);
      if (replicated(name)) {
        CHECK(local.at(name) == numel);
        replicated_sum += numel;
      } else {
        CHECK(local.at(name) * t == numel);  // V = 128256 = 2^8 x 501: no padding for t | 8
        split_local += local.at(name);
      }
    }
    // Per GPU: 2 V d / t (embedding and untied lm_head, vocab-parallel) + L (2d^2 + 2 d KV hd + 3 d ff) / t, plus the
    // replicated 2d per layer (two RMSNorms) + d (final norm).
    CHECK(split_local == (2 * V * d + L * (2 * d * d + 2 * d * KV * hd + 3 * d * ff)) / t);
    CHECK(replicated_sum == L * 2 * d + d);
    CHECK(total_params(ops) == split_local + replicated_sum);
    CHECK(split_local * t + replicated_sum == count_parameters(m));
  }
}

TEST_CASE("tensor parallelism, GPT-2 1.5B on 5 GPUs: the vocabulary is padded up to a multiple of t") {
  // 25 heads, 6400 MLP, 1600 hidden: t = 5 divides them all; V = 50257 does not (Megatron pads the vocabulary,
  // dpsim to a multiple of t: ceil(50257 / 5) = 10052 rows per GPU, 50260 in all).
  const ModelSpec m = load_model(src("models/gpt2-1.5b.yaml"));
  const int64_t V = 50257, d = 1600, L = 48, ff = 6400, P = 1024, t = 5;
  const auto whole = param_numels(build_ops(m, 1024, Dtype::bf16));
  const auto ops = build_ops(m, 1024, Dtype::bf16, {static_cast<int>(t), false});
  const auto local = param_numels(ops);
  REQUIRE(local.size() == whole.size());
  int64_t split_local = 0, replicated_sum = 0;
  for (const auto& [name, numel] : whole) {
    INFO(name);
    if (replicated(name)) {
      CHECK(local.at(name) == numel);
      replicated_sum += numel;
    } else if (name == "wte.weight") {
      CHECK(local.at(name) == div_up(V, t) * d);
      split_local += local.at(name);
    } else {
      CHECK(local.at(name) * t == numel);
      split_local += local.at(name);
    }
  }
  CHECK(div_up(V, t) == 10052);
  // Split per GPU: ceil(V/t) d (tied wte) + L (4d^2 + 3d + 2 d ff + ff) / t: c_attn's weight and bias, attention
  // c_proj's weight, c_fc's weight and bias, mlp c_proj's weight. Replicated: P d + L 6d (ln_1, ln_2 weight and bias,
  // both c_proj biases) + 2d (ln_f).
  CHECK(split_local == div_up(V, t) * d + L * (4 * d * d + 3 * d + 2 * d * ff + ff) / t);
  CHECK(replicated_sum == P * d + L * 6 * d + 2 * d);
  // Summed over the 5 ranks: the model's count plus the 3 padded vocabulary rows.
  CHECK(split_local * t + replicated_sum == count_parameters(m) + (div_up(V, t) * t - V) * d);
  CHECK(count_parameters(m) == 1557611200);
}

TEST_CASE("tensor parallelism: matmul and attention FLOPs per GPU are the t = 1 FLOPs / t, but the padded vocabulary") {
  struct Case {
    const char* model;
    int64_t seq;
    int t;
  };
  for (const Case& k : {Case{"models/llama-3.1-8b.yaml", 2048, 8}, Case{"models/gpt2-1.5b.yaml", 1024, 5}}) {
    INFO(k.model << " t = " << k.t);
    const ModelSpec m = load_model(src(k.model));
    const auto one = build_ops(m, k.seq, Dtype::bf16);
    const auto split = build_ops(m, k.seq, Dtype::bf16, {k.t, false});
    const auto& c = *m.transformer;
    REQUIRE(one.size() == split.size());
    double fwd_one = 0, fwd_split = 0;
    for (size_t i = 0; i < one.size(); ++i) {
      REQUIRE(one[i].name == split[i].name);
      if (one[i].kind != OpKind::matmul && one[i].kind != OpKind::attention) continue;
      INFO(one[i].name);
      fwd_one += one[i].forward_flops_per_sample;
      fwd_split += split[i].forward_flops_per_sample;
      CHECK(split[i].backward_flops_per_sample == 2 * split[i].forward_flops_per_sample);
      if (one[i].name == "lm_head") {  // its GPU's ceil(V/t) vocabulary rows
        CHECK(split[i].forward_flops_per_sample ==
              2.0 * static_cast<double>(k.seq * c.hidden_size * div_up(c.vocab_size, k.t)));
      } else {
        CHECK(split[i].forward_flops_per_sample * k.t == one[i].forward_flops_per_sample);
      }
    }
    const double padded_rows = static_cast<double>(div_up(c.vocab_size, k.t) * k.t - c.vocab_size);
    CHECK(fwd_split * k.t ==
          Approx(fwd_one + 2.0 * static_cast<double>(k.seq * c.hidden_size) * padded_rows).epsilon(1e-15));
  }
}

TEST_CASE("tensor parallelism without sequence parallelism: 2 forward and 2 backward all-reduces per block") {
  // Shoeybi et al. 2019 Section 3: g all-reduces the output of the row-parallel attention projection and MLP GEMM in
  // the forward; f all-reduces the input gradient of the first column-parallel GEMM in the backward. Each is one
  // sample's seq x hidden activations in the activation dtype.
  const ModelSpec m = load_model(src("models/llama-3.1-8b.yaml"));
  const int64_t T = 2048, d = 4096;
  const double S = static_cast<double>(T * d) * 2;  // bf16
  const auto ops = build_ops(m, T, Dtype::bf16, {8, false});
  for (int layer : {0, 17, 31}) {
    const auto c = comms_of(ops, "layers." + std::to_string(layer) + ".");
    INFO("layer " << layer);
    REQUIRE(c.size() == 4);
    int fwd = 0, bwd = 0;
    for (const Placed& p : c) {
      INFO(p.op);
      CHECK(p.kind == CollectiveKind::all_reduce);
      CHECK(p.bytes == S);
      CHECK_FALSE(p.before);
      if (p.backward) {
        ++bwd;
        CHECK((p.op == "self_attn.q_proj" || p.op == "mlp.gate_proj"));
      } else {
        ++fwd;
        CHECK((p.op == "self_attn.o_proj" || p.op == "mlp.down_proj"));
      }
    }
    CHECK(fwd == 2);
    CHECK(bwd == 2);
  }
  // Outside the blocks: the vocab-parallel embedding's all-reduce of its output, the lm_head's (column-parallel)
  // input-gradient all-reduce, and the vocab-parallel cross-entropy's three all-reduces of one fp32 value per token
  // (megatron/core/tensor_parallel/cross_entropy.py at d98e8a6, lines 130, 146, 150).
  const auto embed = comms_of(ops, "embed_tokens");
  REQUIRE(embed.size() == 1);
  CHECK(embed[0].kind == CollectiveKind::all_reduce);
  CHECK_FALSE(embed[0].backward);
  CHECK(embed[0].bytes == S);
  const auto head = comms_of(ops, "lm_head");
  REQUIRE(head.size() == 1);
  CHECK(head[0].kind == CollectiveKind::all_reduce);
  CHECK(head[0].backward);
  CHECK(head[0].bytes == S);
  const auto loss = comms_of(ops, "loss");
  REQUIRE(loss.size() == 3);
  for (const Placed& p : loss) {
    CHECK(p.kind == CollectiveKind::all_reduce);
    CHECK_FALSE(p.backward);
    CHECK(p.bytes == static_cast<double>(T) * 4);
  }
  size_t all = 0;
  for (const Op& op : ops) all += op.tensor_comms.size();
  CHECK(all == 4 * 32 + 1 + 1 + 3);
  // t = 1 adds none.
  for (const Op& op : build_ops(m, T, Dtype::bf16, {1, false})) CHECK(op.tensor_comms.empty());
}

TEST_CASE("sequence parallelism: each all-reduce becomes an all-gather and a reduce-scatter of the same buffer") {
  // Korthikanti et al. 2022 Section 4.2.2: g is an all-gather (forward) / reduce-scatter (backward) and g-bar the
  // reverse; the buffer S is the whole sequence's activations, as for the all-reduce it replaces.
  const ModelSpec m = load_model(src("models/gpt2-1.5b.yaml"));
  const int64_t T = 1024, d = 1600;
  const double S = static_cast<double>(T * d) * 2;
  const auto ops = build_ops(m, T, Dtype::bf16, {5, true});
  const auto c = comms_of(ops, "h.3.");
  REQUIRE(c.size() == 10);
  std::map<std::tuple<std::string, CollectiveKind, bool, bool>, int> seen;
  for (const Placed& p : c) {
    CHECK(p.bytes == S);
    ++seen[{p.op, p.kind, p.backward, p.before}];
  }
  using K = CollectiveKind;
  for (const char* entry : {"attn.c_attn", "mlp.c_fc"}) {
    INFO(entry);
    CHECK(seen[{entry, K::all_gather, false, true}] == 1);      // forward: gather the sequence before the GEMM
    CHECK(seen[{entry, K::all_gather, true, true}] == 1);       // backward: gather the saved split input again
    CHECK(seen[{entry, K::reduce_scatter, true, false}] == 1);  // backward: reduce-scatter its input gradient
  }
  for (const char* exit : {"attn.c_proj", "mlp.c_proj"}) {
    INFO(exit);
    CHECK(seen[{exit, K::reduce_scatter, false, false}] == 1);  // forward: reduce-scatter the output
    CHECK(seen[{exit, K::all_gather, true, true}] == 1);        // backward: gather the output gradient first
  }
  int forward = 0, backward = 0;
  for (const Placed& p : c) (p.backward ? backward : forward) += 1;
  CHECK(forward == 4);
  CHECK(backward == 6);
  const auto loss = comms_of(ops, "loss");
  REQUIRE(loss.size() == 3);
  for (const Placed& p : loss) CHECK(p.bytes == static_cast<double>(T) * 4);
}

TEST_CASE("sequence parallelism: the embedding's output is split along the sequence and its gradient gathered back") {
  // Megatron-LM d98e8a6 megatron/core/models/common/embeddings/language_model_embedding.py: reduce_scatter_embeddings
  // only without a position or token-type table; else an all-reduce, then scatter_to_sequence_parallel_region. Both
  // backwards all-gather the sequence-split gradient (mappings.py, _ReduceScatterToSequenceParallelRegion.backward
  // and _ScatterToSequenceParallelRegion.backward: _gather_along_first_dim).
  struct Case {
    const char* model;
    const char* embedding;
    int64_t seq, hidden;
    int t;
    CollectiveKind forward;
  };
  for (const Case& k : {Case{"models/llama-3.1-8b.yaml", "embed_tokens", 2048, 4096, 8, CollectiveKind::reduce_scatter},
                        Case{"models/gpt2-1.5b.yaml", "wte+wpe", 1024, 1600, 5, CollectiveKind::all_reduce}}) {
    INFO(k.model);
    const auto ops = build_ops(load_model(src(k.model)), k.seq, Dtype::bf16, {k.t, true});
    const auto c = comms_of(ops, k.embedding);
    REQUIRE(c.size() == 2);
    const double S = static_cast<double>(k.seq * k.hidden) * 2;
    CHECK(c[0].kind == k.forward);
    CHECK_FALSE(c[0].backward);
    CHECK(c[0].bytes == S);
    CHECK(c[1].kind == CollectiveKind::all_gather);
    CHECK(c[1].backward);
    CHECK(c[1].before);
    CHECK(c[1].bytes == S);
  }
}

TEST_CASE("activation bytes per GPT-2 layer scale as Korthikanti's terms, without the score matrix and dropout") {
  // Korthikanti et al. 2022 Section 4.1, per layer with 16-bit activations (units of s b h bytes):
  //   replicated over the tensor group: the two LayerNorm inputs (4), the QKV GEMM input (2), the MLP's first GEMM
  //   input (2), the two dropout masks (1 + 1): 10;
  //   split 1/t: Q and K (4), V (2), the output projection's input (2), the MLP's inner GEMM and GeLU inputs (8 + 8):
  //   24; the score terms 5 a s / h (softmax output, its dropout mask and output): 1/t.
  // dpsim keeps no score matrix (flash-style: 5as/h -> 0) and, as FlashAttention does, the attention output O
  // (2/t, which the output projection also saves as its input); without hidden_dropout no masks. So:
  //   t = 1: 34; tensor parallel: 8 + 26/t; tensor + sequence parallel: 34/t.
  const ModelSpec m = load_model(src("models/gpt2-1.5b.yaml"));
  const int64_t s = 1024, h = 1600;
  const double sh = static_cast<double>(s * h);
  CHECK(layer_activation_bytes(build_ops(m, s, Dtype::bf16), "h.0.") == 34 * sh);
  for (const int t : {1, 5, 25}) {
    INFO("t = " << t);
    CHECK(layer_activation_bytes(build_ops(m, s, Dtype::bf16, {t, false}), "h.7.") == Approx((8 + 26.0 / t) * sh));
    if (t > 1) CHECK(layer_activation_bytes(build_ops(m, s, Dtype::bf16, {t, true}), "h.7.") == Approx(34.0 / t * sh));
  }
  // With Megatron's dropout (hidden_dropout 0.1: a one-byte mask after the attention projection and after the MLP,
  // replicated over the tensor group as the paper's 10 says): 10 + 26/t, and 36/t with sequence parallelism.
  const ModelSpec mega = load_model(src("models/megatron-lm-2019-1.2b.yaml"));
  const double sh2 = 1024.0 * 1536;
  CHECK(layer_activation_bytes(build_ops(mega, 1024, Dtype::fp16), "h.0.") == Approx(36 * sh2));
  CHECK(layer_activation_bytes(build_ops(mega, 1024, Dtype::fp16, {8, false}), "h.0.") ==
        Approx((10 + 26.0 / 8) * sh2));
  CHECK(layer_activation_bytes(build_ops(mega, 1024, Dtype::fp16, {8, true}), "h.0.") == Approx(36.0 / 8 * sh2));
}

namespace {

// Llama 3.1 8B on 4 nodes of 8 H100s with tensor 8: 4 data-parallel replicas of 8 GPUs.
Scenario llama_tp8(std::vector<Override> more = {}, const std::string& tensor = "8") {
  more.push_back({"parallelism.tensor", tensor});
  more.push_back({"cluster.nodes", "4"});
  more.push_back({"training.sequence_length", "2048"});
  return load_scenario(src("scenarios/llama3.1-8b-1024xh100-ib.yaml"), more);
}

// The row-parallel GEMMs of a Llama block, where operator g sits.
bool row_parallel(const std::string& op) { return ends_with(op, "o_proj") || ends_with(op, "down_proj"); }

// The previous (or next) instruction on the compute stream that is not a collective.
const Instr& neighbour(const RankProgram& r, size_t i, int step) {
  for (size_t j = i;; j += static_cast<size_t>(step)) {
    const Instr& in = r.instrs.at(j);
    if (j != i && in.stream == StepProgram::kCompute && in.type != Instr::Type::collective) return in;
  }
}

}  // namespace

TEST_CASE("a plan with parallelism.tensor 8: data = world / 8, 1/8-sized gradients, 16 B per local parameter") {
  const Scenario s = llama_tp8();
  const StepPlan plan = make_step_plan(s);
  CHECK(plan.world_size == 32);
  CHECK(plan.dims.data == 4);
  CHECK(plan.dims.tensor == 8);
  CHECK(plan.dims.pipeline == 1);
  CHECK(plan.samples_per_step == 4);  // micro-batch 1 on each of the 4 replicas
  const int64_t V = 128256, d = 4096, L = 32, KV = 8, hd = 128, ff = 14336, t = 8;
  const int64_t local = (2 * V * d + L * (2 * d * d + 2 * d * KV * hd + 3 * d * ff)) / t + L * 2 * d + d;
  CHECK(plan.parameters == local);
  CHECK(plan.model_parameters == 8030261248);
  CHECK(plan.gradient_bytes == 2 * local);
  CHECK(plan.memory.model_state_bytes == 16.0 * static_cast<double>(local));
  // Each GPU runs 1/8 of the model's matmul and attention FLOPs (MFU's numerator stays the whole model's).
  double local_flops = 0;
  for (const PlanOp& op : plan.ops)
    if (op.kind == OpKind::matmul || op.kind == OpKind::attention) local_flops += op.forward_flops + op.backward_flops;
  CHECK(local_flops * t == Approx(plan.model_flops_per_sample * static_cast<double>(plan.micro_batch)).epsilon(1e-12));
  // The DDP buckets are PyTorch's assignment over these local gradients, in ready order.
  std::vector<int64_t> ready;
  int64_t numel = 0;
  for (const Grad& g : plan.grads) {
    ready.push_back(g.bytes);
    numel += g.numel;
  }
  CHECK(numel == local);
  const auto expect = assign_buckets(ready, s.ddp.first_bucket_bytes, s.ddp.bucket_cap_bytes);
  REQUIRE(plan.buckets.size() == expect.size());
  int64_t bytes = 0;
  for (size_t b = 0; b < expect.size(); ++b) {
    CHECK(plan.buckets[b].grads == expect[b]);
    bytes += plan.buckets[b].bytes;
  }
  CHECK(bytes == plan.gradient_bytes);
  CHECK(plan.buckets.size() < make_step_plan(llama_tp8({}, "1")).buckets.size());
}

TEST_CASE("the program of tensor 8: the tensor all-reduces block the compute stream, after g's and f's ops") {
  for (const char* checkpointing : {"none", "full"}) {
    const bool full = std::string(checkpointing) == "full";
    INFO("activation_checkpointing " << checkpointing);
    const StepPlan plan = make_step_plan(llama_tp8({{"training.activation_checkpointing", checkpointing}}));
    const StepProgram p = make_step_program(plan);
    CHECK(p.dims.data == 4);
    CHECK(p.dims.tensor == 8);
    const RankProgram& r = p.classes.front();
    bool in_forward = false;
    int forward_after_row = 0, backward_after_entry = 0, recomputed_before_row = 0, loss_calls = 0, embed_calls = 0;
    for (size_t i = 0; i < r.instrs.size(); ++i) {
      const Instr& in = r.instrs[i];
      if (in.type == Instr::Type::mark && in.mark == Mark::forward_begin) in_forward = true;
      if (in.type == Instr::Type::mark && in.mark == Mark::forward_end) in_forward = false;
      if (in.type != Instr::Type::collective) continue;
      const CommCall& call = r.comms[static_cast<size_t>(in.comm)];
      INFO("instruction " << i << ": " << describe(in, p, r));
      // Data-parallel buckets on the comm stream, tensor calls on the compute stream: nothing else.
      CHECK((call.group == GroupKind::tensor) == (in.stream == StepProgram::kCompute));
      CHECK((call.group == GroupKind::data) == (in.stream == StepProgram::kComm));
      if (call.group != GroupKind::tensor) continue;
      CHECK(call.kind == CollectiveKind::all_reduce);
      CHECK(call.inputs_ready.kind == EventKind::none);
      const Instr& prev = neighbour(r, i, -1);
      const Instr& next = neighbour(r, i, +1);
      const std::string prev_op = prev.op >= 0 ? plan.ops[static_cast<size_t>(prev.op)].name : "";
      const std::string next_op = next.op >= 0 ? plan.ops[static_cast<size_t>(next.op)].name : "";
      const bool row = row_parallel(in_forward ? prev_op : next_op);
      if (in_forward) {
        REQUIRE(prev.type == Instr::Type::forward);  // g: after the op's forward
        if (prev_op == "loss") {
          ++loss_calls;
        } else if (prev_op == "embed_tokens") {
          ++embed_calls;
        } else {
          CHECK(row);
          ++forward_after_row;
        }
      } else if (prev.type == Instr::Type::backward &&
                 (ends_with(prev_op, "q_proj") || ends_with(prev_op, "gate_proj") || prev_op == "lm_head")) {
        ++backward_after_entry;  // f: after the entry column op's backward
      } else {
        // Full recomputation: g's all-reduce again, in the block's backward, right before the row op's backward
        // (which reruns its forward first).
        CHECK(full);
        CHECK(next.type == Instr::Type::backward);
        CHECK(row);
        CHECK(plan.ops[static_cast<size_t>(next.op)].recompute_forward);
        ++recomputed_before_row;
      }
    }
    CHECK(forward_after_row == 2 * 32);
    CHECK(backward_after_entry == 2 * 32 + 1);  // and the lm_head's input gradient
    CHECK(embed_calls == 1);
    CHECK(loss_calls == 3);
    CHECK(recomputed_before_row == (full ? 2 * 32 : 0));
  }
}

namespace {
// Whether a linear layer is column-parallel with sequence parallelism: its backward re-gathers its saved input.
bool regathers(const PlanOp& op) {
  return std::any_of(op.tensor_calls.begin(), op.tensor_calls.end(), [](const TensorCall& c) { return c.regather; });
}

Scenario tp_overlap_scenario(const char* overlap, bool sequence_parallel = true) {
  return load_scenario(src("scenarios/llama3.1-70b-tp8-pp2-64xh100.yaml"),
                       {{"parallelism.tp_comm_overlap", overlap},
                        {"parallelism.sequence_parallel", sequence_parallel ? "true" : "false"}});
}
}  // namespace

TEST_CASE("sequence parallelism: a column-parallel linear gathers its saved input again for its weight gradient") {
  const StepPlan plan = make_step_plan(tp_overlap_scenario("none"));
  int columns = 0;
  for (const PlanOp& op : plan.ops) {
    if (!regathers(op)) continue;
    ++columns;
    // Megatron-Core layers.py: the forward's all-gather of the split input, the same buffer gathered again before
    // the backward, the input gradient reduce-scattered after it
    std::vector<const TensorCall*> gathers;
    for (const TensorCall& c : op.tensor_calls)
      if (c.kind == CollectiveKind::all_gather) gathers.push_back(&c);
    REQUIRE(gathers.size() == 2);
    CHECK((!gathers[0]->backward && !gathers[0]->regather));
    CHECK((gathers[1]->backward && gathers[1]->before && gathers[1]->regather));
    CHECK(gathers[1]->bytes == gathers[0]->bytes);
  }
  // the fused qkv and gate/up linears of Llama 3.1 70B's 80 blocks, and the head
  CHECK(columns == 2 * 80 + 1);
  // Without sequence parallelism the saved input is whole: nothing to gather.
  for (const PlanOp& op : make_step_plan(tp_overlap_scenario("none", false)).ops) CHECK_FALSE(regathers(op));
}

TEST_CASE("tensor_impl torch: a column-parallel linear keeps its gathered input and does not gather it again") {
  const auto plan_of = [](const char* impl) {
    return make_step_plan(
        load_scenario(src("scenarios/llama3.1-70b-tp8-pp2-64xh100.yaml"),
                      {{"parallelism.tensor_impl", impl}, {"training.activation_checkpointing", "none"}}));
  };
  const StepPlan megatron = plan_of("megatron"), torch = plan_of("torch");
  REQUIRE(megatron.ops.size() == torch.ops.size());
  int entries = 0;
  for (size_t i = 0; i < torch.ops.size(); ++i) {
    const PlanOp &m = megatron.ops[i], &t = torch.ops[i];
    REQUIRE(m.name == t.name);
    CHECK_FALSE(regathers(t));
    if (!regathers(m)) {  // every other op: the same calls
      CHECK(m.tensor_calls.size() == t.tensor_calls.size());
      continue;
    }
    ++entries;
    // the same calls less the backward's second gather (torchtitan's PrepareModuleInput gathers once, autograd keeps
    // it)
    CHECK(t.tensor_calls.size() + 1 == m.tensor_calls.size());
  }
  CHECK(entries == 2 * 80 + 1);
  // what they keep: the gathered input, t = 8 times the split one, for the linears that save it
  CHECK(torch.memory.activation_bytes > megatron.memory.activation_bytes);
  const Scenario plain = load_scenario(src("scenarios/llama3.1-70b-tp8-pp2-64xh100.yaml"));
  CHECK_THROWS_WITH(load_scenario(src("scenarios/llama3.1-70b-tp8-pp2-64xh100.yaml"),
                                  {{"parallelism.tp_comm_overlap", "backward"}, {"parallelism.tensor_impl", "torch"}}),
                    Catch::Contains("tp_comm_overlap backward is Megatron-Core's and Transformer Engine's"));
  CHECK(plain.parallelism.tensor_impl == TensorImpl::megatron);  // the default
}

TEST_CASE("tp_comm_overlap userbuffers: the linear layers' sequence-parallel calls run beside their GEMMs") {
  const StepPlan plan = make_step_plan(tp_overlap_scenario("userbuffers"));
  REQUIRE(plan.tp_comm_overlap == TpCommOverlap::userbuffers);
  // true, the key's boolean spelling, is userbuffers
  CHECK(make_step_plan(tp_overlap_scenario("true")).tp_comm_overlap == TpCommOverlap::userbuffers);
  const StepProgram p = make_step_program(plan);
  std::map<TpOverlap, int> methods;
  for (const RankProgram& r : p.classes)
    for (const CommCall& c : r.comms) {
      if (c.group != GroupKind::tensor) continue;
      ++methods[c.tp_overlap];
      if (c.tp_overlap == TpOverlap::none) continue;
      const PlanOp& op = plan.ops.at(static_cast<size_t>(c.overlap_op));
      CHECK(op.kind == OpKind::matmul);
      // base.py `methods`: the all-gathers before a GEMM by ring exchange ("qkv_fprop", "proj_dgrad"), the re-gather
      // beside qkv/fc1's input gradient and their input gradient's reduce-scatter beside the weight gradient in bulk
      // ("qkv_dgrad", "qkv_wgrad"), the forward reduce-scatters pipelined ("proj_fprop")
      if (c.kind == CollectiveKind::all_gather)
        CHECK(c.tp_overlap == (c.overlap_backward && regathers(op) ? TpOverlap::bulk : TpOverlap::ring_exchange));
      if (c.kind == CollectiveKind::reduce_scatter)
        CHECK(c.tp_overlap == (c.overlap_backward ? TpOverlap::bulk : TpOverlap::pipeline));
    }
  CHECK(methods[TpOverlap::ring_exchange] > 0);
  CHECK(methods[TpOverlap::pipeline] > 0);
  CHECK(methods[TpOverlap::bulk] > 0);
  CHECK(methods[TpOverlap::none] > 0);  // the embedding's and the loss's
  CHECK(methods[TpOverlap::async_nccl] == 0);
  // Without the key nothing is overlapped.
  for (const RankProgram& r : make_step_program(make_step_plan(tp_overlap_scenario("none"))).classes)
    for (const CommCall& c : r.comms) CHECK(c.tp_overlap == TpOverlap::none);
}

TEST_CASE("tp_comm_overlap backward: only a column-parallel linear's backward calls run beside its GEMMs") {
  for (bool sp : {true, false}) {
    CAPTURE(sp);
    const StepPlan plan = make_step_plan(tp_overlap_scenario("backward", sp));
    std::map<TpOverlap, int> methods;
    for (const RankProgram& r : make_step_program(plan).classes)
      for (const CommCall& c : r.comms) {
        if (c.group != GroupKind::tensor) continue;
        ++methods[c.tp_overlap];
        if (c.tp_overlap == TpOverlap::none) continue;  // the forward's, the row-parallel linears' gathers, ...
        CHECK(c.tp_overlap == TpOverlap::async_nccl);
        CHECK(c.overlap_backward);
        const PlanOp& op = plan.ops.at(static_cast<size_t>(c.overlap_op));
        CHECK(op.kind == OpKind::matmul);
        // with sequence parallelism the re-gather and the reduce-scatter, else the input gradient's all-reduce
        if (sp) CHECK(c.kind != CollectiveKind::all_reduce);
        if (!sp) CHECK(c.kind == CollectiveKind::all_reduce);
      }
    CHECK(methods[TpOverlap::async_nccl] > 0);
    CHECK(methods[TpOverlap::none] > 0);
    CHECK(methods.size() == 2);
  }
}
