#include "dpsim/plan.hpp"

#include <algorithm>

namespace dpsim {

double model_state_bytes_per_parameter(Dtype param_dtype, Dtype grad_dtype, Optimizer optimizer) {
  // Weights + gradients + an fp32 master copy when weights are 16-bit + optimizer moments (fp32).
  const double master = dtype_bytes(param_dtype) < 4 ? 4.0 : 0.0;
  const double moments = optimizer == Optimizer::adamw ? 8.0 : optimizer == Optimizer::sgd_momentum ? 4.0 : 0.0;
  return dtype_bytes(param_dtype) + dtype_bytes(grad_dtype) + master + moments;
}

double optimizer_bytes_per_parameter(Optimizer optimizer) {
  // Memory traffic of one fused update per parameter, mixed precision: AdamW reads master, m, v (12 B) and the
  // 16-bit grad (2 B), writes master, m, v (12 B) and the 16-bit weight (2 B) = 28 B; SGD with momentum drops
  // one moment (20 B); plain SGD both (12 B). The fp32 variants move the same bytes (4 B grads and weights, no copy).
  switch (optimizer) {
    case Optimizer::adamw: return 28.0;
    case Optimizer::sgd_momentum: return 20.0;
    case Optimizer::sgd: return 12.0;
  }
  return 28.0;
}

std::vector<std::vector<int>> assign_buckets(const std::vector<int64_t>& tensor_bytes, double first_bucket_bytes,
                                             double bucket_cap_bytes) {
  std::vector<std::vector<int>> buckets;
  std::vector<int> open;
  double size = 0;
  double limit = first_bucket_bytes;
  for (size_t i = 0; i < tensor_bytes.size(); ++i) {
    open.push_back(static_cast<int>(i));
    size += static_cast<double>(tensor_bytes[i]);
    if (size >= limit) {
      buckets.push_back(std::move(open));
      open.clear();
      size = 0;
      limit = bucket_cap_bytes;
    }
  }
  if (!open.empty()) buckets.push_back(std::move(open));
  return buckets;
}

namespace {

PlanOp to_plan_op(const Op& op, int64_t micro_batch) {
  const auto mb = static_cast<double>(micro_batch);
  PlanOp p;
  p.name = op.name;
  p.kind = op.kind;
  p.forward_flops = op.forward_flops_per_sample * mb;
  p.backward_flops = op.backward_flops_per_sample * mb;
  p.forward_bytes = op.forward_bytes_per_sample * mb;
  p.backward_bytes = op.backward_bytes_per_sample * mb + op.backward_fixed_bytes;
  for (GemmShape g : op.gemms) {
    if (g.batch > 1) {
      g.batch *= micro_batch;
    } else {
      g.m *= micro_batch;
    }
    p.gemms.push_back(g);
  }
  return p;
}

}  // namespace

StepPlan make_step_plan(const Scenario& s) {
  StepPlan plan;
  plan.scenario = s.name;
  plan.world_size = s.world_size();
  plan.micro_batch = s.training.micro_batch;
  plan.sequence_length = s.training.sequence_length;
  plan.gradient_accumulation = s.training.gradient_accumulation;
  const auto ops = build_ops(s.model, s.training.sequence_length, s.training.param_dtype);
  const int grad_bytes = dtype_bytes(s.training.grad_dtype);
  double activations = 0;
  for (const auto& op : ops) {
    plan.ops.push_back(to_plan_op(op, s.training.micro_batch));
    activations += op.activation_bytes_per_sample * static_cast<double>(s.training.micro_batch);
  }
  for (int i = static_cast<int>(ops.size()) - 1; i >= 0; --i) plan.backward_order.push_back(i);

  // Gradients become ready in backward order; within an op, in reverse of definition.
  std::vector<int64_t> ready_bytes;
  for (int op_index : plan.backward_order) {
    const auto& params = ops[static_cast<size_t>(op_index)].params;
    for (auto it = params.rbegin(); it != params.rend(); ++it) {
      Grad g{it->name, it->numel, it->numel * grad_bytes, op_index, 0};
      plan.ops[static_cast<size_t>(op_index)].grads.push_back(static_cast<int>(plan.grads.size()));
      // DDP copies each gradient into its bucket and divides by the world size: read + write.
      plan.ops[static_cast<size_t>(op_index)].backward_bytes += 2.0 * static_cast<double>(g.bytes);
      plan.parameters += g.numel;
      plan.gradient_bytes += g.bytes;
      ready_bytes.push_back(g.bytes);
      plan.grads.push_back(std::move(g));
    }
  }

  std::vector<int> position(ops.size());
  for (size_t k = 0; k < plan.backward_order.size(); ++k)
    position[static_cast<size_t>(plan.backward_order[k])] = static_cast<int>(k);
  const auto groups = s.ddp.first_iteration
                          ? std::vector<std::vector<int>>{}
                          : assign_buckets(ready_bytes, s.ddp.first_bucket_bytes, s.ddp.bucket_cap_bytes);
  std::vector<std::vector<int>> bucket_grads = groups;
  if (s.ddp.first_iteration && !plan.grads.empty()) {  // iteration 0: one bucket for everything
    bucket_grads.emplace_back();
    for (size_t i = 0; i < plan.grads.size(); ++i) bucket_grads.back().push_back(static_cast<int>(i));
  }
  for (const auto& members : bucket_grads) {
    Bucket b;
    b.index = static_cast<int>(plan.buckets.size());
    b.grads = members;
    for (int g : members) {
      b.bytes += plan.grads[static_cast<size_t>(g)].bytes;
      plan.grads[static_cast<size_t>(g)].bucket = b.index;
      b.ready_after_backward_op =
          std::max(b.ready_after_backward_op, position[static_cast<size_t>(plan.grads[static_cast<size_t>(g)].op)]);
    }
    plan.buckets.push_back(std::move(b));
  }

  if (!s.ddp.gradient_as_bucket_view) plan.final_copy_bytes = 2.0 * static_cast<double>(plan.gradient_bytes);
  plan.optimizer.parameters = plan.parameters;
  plan.optimizer.bytes = static_cast<double>(plan.parameters) * optimizer_bytes_per_parameter(s.training.optimizer);
  plan.memory.model_state_bytes =
      static_cast<double>(plan.parameters) *
      model_state_bytes_per_parameter(s.training.param_dtype, s.training.grad_dtype, s.training.optimizer);
  plan.memory.ddp_buffer_bytes = s.ddp.gradient_as_bucket_view ? 0.0 : static_cast<double>(plan.gradient_bytes);
  plan.memory.activation_bytes = s.training.activations ? activations : 0.0;
  return plan;
}

}  // namespace dpsim
