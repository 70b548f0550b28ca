#pragma once
// A hand-built StepPlan small enough to check by hand and on the GPU against a host reference:
// embedding -> linear (4 -> 6) -> norm (6) -> linear (6 -> 3), plus one batched attention op.
#include "dpsim/plan.hpp"

namespace dpsim::test {

inline StepPlan tiny_plan(int64_t tokens = 8, int64_t accumulation = 1) {
  StepPlan p;
  p.scenario = "tiny";
  p.world_size = 2;  // the data group has two ranks: the walker issues its collectives
  p.dims.data = 2;
  p.micro_batch = 1;
  p.sequence_length = tokens;
  p.gradient_accumulation = accumulation;
  auto op = [&](const char* name, OpKind kind) {
    PlanOp o;
    o.name = name;
    o.kind = kind;
    p.ops.push_back(o);
    return static_cast<int>(p.ops.size()) - 1;
  };
  const int embed = op("embed", OpKind::embedding);
  p.ops[embed].forward_bytes = 64;
  const int lin1 = op("lin1", OpKind::matmul);
  p.ops[lin1].gemms = {GemmShape{tokens, 6, 4, 1}};
  const int attn = op("attn", OpKind::attention);
  p.ops[attn].gemms = {GemmShape{tokens, tokens, 2, 3}};
  const int norm = op("norm", OpKind::elementwise);
  p.ops[norm].forward_bytes = 96;
  p.ops[norm].backward_bytes = 192;
  const int lin2 = op("lin2", OpKind::matmul);
  p.ops[lin2].gemms = {GemmShape{tokens, 3, 6, 1}};
  p.backward_order = {lin2, norm, attn, lin1, embed};
  // Gradients in ready order; buckets: [lin2.w], [norm.w, lin1.w], [embed.w].
  auto grad = [&](const char* name, int64_t numel, int o, int bucket) {
    Grad g;
    g.name = name;
    g.numel = numel;
    g.bytes = numel * 2;
    g.op = o;
    g.bucket = bucket;
    p.grads.push_back(g);
    p.ops[o].grads.push_back(static_cast<int>(p.grads.size()) - 1);
  };
  grad("lin2.weight", 18, lin2, 0);
  grad("norm.weight", 6, norm, 1);
  grad("lin1.weight", 24, lin1, 1);
  grad("embed.weight", 10 * 4, embed, 2);
  p.buckets = {Bucket{0, {0}, 36, 0}, Bucket{1, {1, 2}, 60, 3}, Bucket{2, {3}, 80, 4}};
  for (PlanOp& o : p.ops) {  // DDP's copy into the bucket, divided by the world size (core/plan.cpp counts it so)
    for (int g : o.grads) o.grad_copy_bytes += 2.0 * static_cast<double>(p.grads[static_cast<size_t>(g)].bytes);
    o.backward_bytes += o.grad_copy_bytes;
  }
  p.parameters = 18 + 6 + 24 + 40;
  p.gradient_bytes = p.parameters * 2;
  p.optimizer.parameters = p.parameters;
  p.optimizer.bytes = 28.0 * static_cast<double>(p.parameters);
  p.memory.activation_bytes = 4096;
  return p;
}

}  // namespace dpsim::test
