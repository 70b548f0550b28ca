#include "dpsim/plan.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include <fmt/format.h>

#include "dpsim/autocast.hpp"
#include "dpsim/conv_layout.hpp"
#include "dpsim/error.hpp"
#include "dpsim/fp8.hpp"
#include "dpsim/sharding.hpp"
#include "dpsim/trainable.hpp"
#include "load_internal.hpp"

namespace dpsim {

namespace {}  // namespace

double model_state_bytes_per_parameter(Dtype param_dtype, Dtype grad_dtype, Optimizer optimizer, bool master_weights) {
  return model_state_parts(param_dtype, grad_dtype, optimizer, master_weights).total();
}

double optimizer_bytes_per_parameter(Optimizer optimizer, OptimizerImpl impl, Dtype param_dtype, Dtype grad_dtype,
                                     bool master_weights) {
  const OptimizerPasses p = optimizer_passes(optimizer, impl);
  const double weight = dtype_bytes(param_dtype);
  const bool master = keeps_fp32_master(param_dtype, master_weights);
  // With 16-bit weights the update runs on the fp32 master and the 16-bit weight is written from it: inside the
  // fused kernel (write 2 B), or as one more copy pass otherwise (read the master 4 B, write 2 B). Without the master
  // (pure 16-bit) every pass is over the 16-bit weights and moments.
  double copy = 0;
  if (master) copy = impl == OptimizerImpl::fused ? weight : 4.0 + weight;
  return p.state * (master ? 4.0 : weight) + p.grad * dtype_bytes(grad_dtype) + copy;
}

double optimizer_kernels(Optimizer optimizer, OptimizerImpl impl, Dtype param_dtype, int64_t tensors,
                         bool master_weights) {
  const OptimizerPasses p = optimizer_passes(optimizer, impl);
  const bool copy_pass = keeps_fp32_master(param_dtype, master_weights) && impl != OptimizerImpl::fused;
  const double per_group = p.kernels + (copy_pass ? 1 : 0);
  return impl == OptimizerImpl::forloop ? per_group * static_cast<double>(tensors) : per_group;
}

namespace {

// The order gradients become ready: the model's recorded order (an imported layer list), else backward order and
// within an op the reverse of definition. Each entry: the op and its parameter tensor.
std::vector<std::pair<int, const ParamTensor*>> gradient_ready_order(const ModelSpec& model, const std::vector<Op>& ops,
                                                                     const std::vector<int>& backward_order) {
  std::vector<std::pair<int, const ParamTensor*>> order;
  for (int op_index : backward_order) {
    const auto& params = ops[static_cast<size_t>(op_index)].params;
    for (auto it = params.rbegin(); it != params.rend(); ++it) order.emplace_back(op_index, &*it);
  }
  if (model.gradient_ready_order.empty()) return order;
  std::map<std::string, std::pair<int, const ParamTensor*>> by_name;
  for (const auto& entry : order) by_name.emplace(entry.second->name, entry);
  order.clear();
  for (const std::string& name : model.gradient_ready_order) order.push_back(by_name.at(name));
  return order;
}

}  // namespace

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

std::vector<std::vector<int>> deepspeed_buckets(const std::vector<int64_t>& tensor_numel,
                                                int64_t reduce_bucket_elements) {
  std::vector<std::vector<int>> buckets;
  std::vector<int> open;
  int64_t elements = 0;
  for (size_t i = 0; i < tensor_numel.size(); ++i) {
    if (elements + tensor_numel[i] > reduce_bucket_elements && !open.empty()) {
      buckets.push_back(std::move(open));
      open.clear();
      elements = 0;
    }
    open.push_back(static_cast<int>(i));
    elements += tensor_numel[i];
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
  p.forward_bytes = op.forward_bytes_per_sample * mb + op.forward_fixed_bytes;
  p.backward_bytes = op.backward_bytes_per_sample * mb + op.backward_fixed_bytes;
  p.score_dropout = op.score_dropout;
  p.causal = op.causal;
  p.eager_kernel = op.eager_kernel;
  p.bias_grad_bytes = op.bias_grad_bytes_per_sample * mb;
  p.input_grad = op.input_grad;
  p.weight_grad = op.weight_grad;
  p.fp8 = op.fp8;
  p.context_kv_bytes = op.context_kv_bytes_per_sample * mb;
  for (const TensorComm& c : op.tensor_comms)
    p.tensor_calls.push_back({c.kind, c.backward, c.before, c.bytes_per_sample * mb, c.regather});
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

namespace {

// Bytes per gradient element as FSDP reduces it (MixedPrecision.reduce_dtype; unset: the gradients' own dtype), and
// as fully_shard accumulates it unsharded between micro-batches where gradient sync is off.
double fsdp_reduce_bytes(const Scenario& s) { return dtype_bytes(s.fsdp.reduce_dtype.value_or(s.training.grad_dtype)); }

// FSDP units in forward order, the root (unit "") first: FSDP's root instance gathers its parameters at the start
// of the forward and keeps them to the end of the backward. Under pipelining each virtual stage's module is wrapped
// on its own: its blocks are its units, and its other ops (the embedding on the first, the head on the last) its root.
std::vector<ShardUnit> fsdp_units(const Scenario& s, const std::vector<Op>& ops, const PipelinePlan& pp) {
  std::vector<ShardUnit> units{ShardUnit{}};
  std::map<std::pair<int, std::string>, size_t> index{{{0, ""}, 0}};
  const double param_bytes = dtype_bytes(s.training.param_dtype);
  const double reduce_bytes = fsdp_reduce_bytes(s);
  // A wrapped module without parameters has no FlatParameter to gather: its ops run in the root's.
  std::map<std::string, bool> has_params;
  for (const Op& op : ops)
    has_params[fsdp_wrapped_unit_of(op.name, s.fsdp.wrap_blocks, s.fsdp.wrap_module)] |= !op.params.empty();
  for (size_t o = 0; o < ops.size(); ++o) {
    std::string name = fsdp_wrapped_unit_of(ops[o].name, s.fsdp.wrap_blocks, s.fsdp.wrap_module);
    if (!has_params[name]) name.clear();
    if (name.empty() && s.fsdp.wrap_root_ops && !ops[o].params.empty()) name = ops[o].name;
    const int vstage = pp.stages > 1 ? pp.virtual_stage_of_op[o] : 0;
    auto [it, added] = index.emplace(std::make_pair(vstage, name), units.size());
    if (added) units.push_back(ShardUnit{.name = name, .stage = vstage % pp.stages});
    ShardUnit& u = units[it->second];
    u.ops.push_back(static_cast<int>(o));
    for (const auto& p : ops[o].params) {
      u.parameters += p.numel;
      u.trainable_parameters += p.trainable ? p.numel : 0;
    }
  }
  for (ShardUnit& u : units) {
    u.gather_bytes = static_cast<double>(u.parameters) * param_bytes;
    u.reduce_bytes = static_cast<double>(u.gradient_parameters()) * reduce_bytes;
  }
  std::erase_if(units, [](const ShardUnit& u) { return u.ops.empty(); });  // every op of a stage in a wrapped block
  return units;
}

// DeepSpeed's stage 1 or 2 (a zero_optimization block with zero1 / zero2; the loader refuses it with the others).
bool deepspeed_zero(const Scenario& s) {
  return s.zero_optimization &&
         (s.parallelism.sharding == Sharding::zero1 || s.parallelism.sharding == Sharding::zero2);
}

// DeepSpeed's buckets in its reduction order: the gradient hooks' (ready) order, except stage 1 without overlap_comm,
// which registers no hooks (stage_1_and_2.py:527) and reduces after the backward in parameter (definition) order
// (reduce_gradients, :719-723). Each bucket lists its gradients, indices into `grads`.
std::vector<std::vector<int>> deepspeed_bucket_grads(const Scenario& s, const std::vector<Grad>& grads) {
  const bool hooks = s.parallelism.sharding == Sharding::zero2 || s.zero_optimization->overlap_comm;
  std::vector<int> order(grads.size());
  for (size_t i = 0; i < grads.size(); ++i) order[i] = static_cast<int>(hooks ? i : grads.size() - 1 - i);
  std::vector<int64_t> numel;
  for (int g : order) numel.push_back(grads[static_cast<size_t>(g)].numel);
  auto buckets = deepspeed_buckets(numel, s.zero_optimization->reduce_bucket_size);
  for (auto& b : buckets)
    for (int& i : b) i = order[static_cast<size_t>(i)];
  return buckets;
}

// DeepSpeed's contiguous bucket buffers: reduce_bucket_size elements of the weights' dtype (self.dtype, :284), two with
// overlap_comm (double buffering, stage_1_and_2.py:2048-2060).
double deepspeed_bucket_buffer_bytes(const Scenario& s) {
  const ZeroOptimization& z = *s.zero_optimization;
  return static_cast<double>(z.reduce_bucket_size) * dtype_bytes(s.training.param_dtype) * (z.overlap_comm ? 2 : 1);
}

void plan_sharding(const Scenario& s, const std::vector<Op>& ops, StepPlan& plan) {
  Sharded& sh = plan.sharded;
  sh.sharding = s.parallelism.sharding;
  sh.backward_prefetch = s.fsdp.backward_prefetch;
  sh.limit_all_gathers = s.fsdp.limit_all_gathers;
  sh.forward_prefetch = s.fsdp.forward_prefetch;
  sh.no_sync = s.fsdp.no_sync;
  sh.inflight_all_gathers = s.nccl.fsdp_inflight_all_gathers;
  // zero3 reshards after each forward by default; under pipelining it keeps the stage gathered (load_scenario.cpp
  // check_sharding_with_pipeline refuses true there).
  sh.reshard_after_forward =
      sh.sharding == Sharding::zero3 && s.fsdp.reshard_after_forward.value_or(s.parallelism.pipeline <= 1);
  if (sh.sharding == Sharding::none) return;
  // Over data x context GPUs with context parallelism (groups.hpp GroupKind::data)
  const int data_group = group_size(GroupKind::data, plan.dims);
  sh.shards = s.parallelism.hybrid ? s.parallelism.shard_group : data_group;
  sh.replicas = data_group / sh.shards;
  sh.param_per_grad_bytes =
      static_cast<double>(dtype_bytes(s.training.param_dtype)) / dtype_bytes(s.training.grad_dtype);
  sh.deepspeed = deepspeed_zero(s);
  sh.overlap_comm = sh.deepspeed && s.zero_optimization->overlap_comm;
  if (!sh.deepspeed && (sh.sharding == Sharding::zero2 || sh.sharding == Sharding::zero3))
    sh.units = fsdp_units(s, ops, plan.pipeline);
}

// Frozen weights (no gradient, no optimizer state): `bytes` as stored, sharded only by zero3.
double frozen_weight_bytes(double bytes, Sharding sharding, int shards) {
  return sharding == Sharding::zero3 ? bytes / std::max(1, shards) : bytes;
}

// FSDP: the gradient a unit's frozen tensors get when some tensor of the unit trains (ShardUnit::gradient_parameters),
// sharded as the trainable gradients are.
double frozen_gradient_bytes(const StepPlan& plan, const ModelStateParts& parts, int stage) {
  const Sharded& sh = plan.sharded;
  double frozen = 0;
  for (const ShardUnit& u : sh.units)
    if (plan.pipeline.stages == 1 || u.stage == stage)
      frozen += static_cast<double>(u.gradient_parameters() - u.trainable_parameters);
  return frozen * parts.grads / std::max(1, sh.shards);
}

// The optimizer step over `parameters` in `tensors` tensors; sharded, each rank updates its 1/N of the optimizer state
// and master weights.
OptimizerStep optimizer_step(const Scenario& s, int64_t parameters, int64_t tensors, const Sharded& sh) {
  const Training& t = s.training;
  const TrainableDtypes dtypes = trainable_dtypes(t);
  OptimizerStep o;
  o.parameters = parameters;
  o.tensors = tensors;
  o.bytes =
      static_cast<double>(parameters) *
      optimizer_bytes_per_parameter(t.optimizer, t.optimizer_impl, dtypes.weights, dtypes.grads, t.master_weights);
  o.kernels = optimizer_kernels(t.optimizer, t.optimizer_impl, dtypes.weights, tensors, t.master_weights);
  if (sh.sharding == Sharding::none) return o;
  const auto n = static_cast<double>(sh.shards);
  o.parameters = static_cast<int64_t>(std::ceil(static_cast<double>(o.parameters) / n));
  o.bytes /= n;
  return o;
}

// zero3 holds at most two units' full weights at once (FSDP's limit_all_gathers: the one computing and the one
// prefetched, three with forward_prefetch; without the limit, or with reshard_after_forward false, every unit may be
// gathered at once), the root's for the whole step, and one unit's full gradients while they are reduce-scattered.
// Under pipelining (`stage`'s units only) every unit stays gathered for the whole step and its full gradients
// accumulate over the micro-batches until the last one's backward reduce-scatters them (PyTorch's pipelining stage
// turns FSDP's gradient sync off for all but the last micro-batch: torch/distributed/pipelining/stage.py
// backward_maybe_with_nosync), in `accumulated_grad_bytes` per element: fully_shard keeps them in its reduce dtype
// where that differs from the gradients' (torch/distributed/fsdp/_fully_shard/_fsdp_param.py
// FSDPParam.to_accumulated_grad_if_needed: "self.unsharded_accumulated_grad = unsharded_grad.to(self.reduce_dtype)"),
// so bf16 gradients reduced in fp32 are held in fp32.
double unsharded_in_flight_bytes(const StepPlan& plan, const ModelStateParts& parts, double accumulated_grad_bytes,
                                 int stage) {
  const Sharded& sh = plan.sharded;
  if (sh.sharding != Sharding::zero3 || sh.units.empty()) return 0.0;
  if (plan.pipeline.stages > 1) {
    double weights = 0, grads = 0;
    for (const ShardUnit& u : sh.units)
      if (u.stage == stage) {
        weights += static_cast<double>(u.parameters);
        grads += static_cast<double>(u.gradient_parameters());
      }
    return weights * parts.weights + grads * accumulated_grad_bytes;
  }
  std::vector<double> blocks;
  double root = 0;
  for (const ShardUnit& u : sh.units) {
    if (u.name.empty())
      root = static_cast<double>(u.parameters);
    else
      blocks.push_back(static_cast<double>(u.parameters));
  }
  std::sort(blocks.rbegin(), blocks.rend());
  const size_t held = sh.limit_all_gathers && sh.reshard_after_forward
                          ? std::min<size_t>(static_cast<size_t>(sh.limiter_lag()), blocks.size())
                          : blocks.size();
  double gathered = root;
  for (size_t i = 0; i < held; ++i) gathered += blocks[i];
  const double largest = std::max(root, blocks.empty() ? 0.0 : blocks.front());
  return gathered * parts.weights + largest * parts.grads;
}

// The activations one micro-batch keeps for its backward. training.activation_checkpointing full (Korthikanti et
// al. 2022, arXiv 2205.05198, Section 4, "full activation recomputation"; torch.utils.checkpoint around each block,
// as Composer's fsdp_config.activation_checkpointing wraps every FSDP unit): each transformer block (the unit names
// of fsdp_unit_of: layers.N, h.N, encoder.layer.N) keeps only its input, sequence x hidden activations per sample,
// and runs its forward again at the start of its backward, so at most one block's own activations exist at once.
// The ops outside the blocks (embedding, final norm, head, loss) keep theirs. selective (the same paper, Section 5)
// reruns only each block's attention core, which keeps its inputs (q, k, v) and not its scores or output; one core's
// own activations exist at once, while it reruns.
// What one micro-batch keeps for the backward of the ops `in` selects: `kept` per micro-batch in flight, and the
// `largest` own activations of one recomputed part (a block, or an attention core), held once while it recomputes, or
// the loss's backward tensors, held once at the start of the backward (all of them beside everything kept).
struct KeptActivations {
  double kept = 0;
  double largest = 0;
};

// What an op keeps for its backward, per sample: its activations and, for eager attention, the score elements its
// softmax and matmul keep (data/gpus.yaml kernels.eager_attention_bytes_per_score: saved, and saved_dropout with
// attention dropout).
double saved_bytes_per_sample(const Scenario& s, const Op& op) {
  if (op.kind != OpKind::attention || !is_eager(s.training.attention) || op.gemms.empty())
    return op.activation_bytes_per_sample;
  const GemmShape& scores = op.gemms.front();  // Q K^T: sequence x sequence per head
  const double elements =
      static_cast<double>(scores.m) * static_cast<double>(scores.n) * static_cast<double>(scores.batch);
  const EagerScoreBytes& b = s.topology.gpu.eager_score_bytes.at(s.training.attention);
  return op.activation_bytes_per_sample + elements * (b.saved + (op.score_dropout ? b.saved_dropout : 0.0));
}

// What the loss's backward allocates beside what it keeps, per sample, at its peak: with training.cross_entropy torch,
// torch.nn.functional.cross_entropy is nll_loss of log_softmax (pytorch/pytorch aten/src/ATen/native/LossNLL.cpp
// cross_entropy_loss_symint, without label smoothing), which saves the fp32 log-probabilities (its activations); its
// backward allocates nll_loss_backward's gradient, dense and the logits' size, then _log_softmax_backward_data's result
// beside it, both fp32: two more tensors of its saved bytes, before the cast back to 16 bits frees them. fused kernels
// write the gradient over the saved softmax (Megatron-LM's vocab-parallel cross-entropy): nothing more.
double loss_backward_transient_bytes(const Scenario& s, const Op& op) {
  if (!op.cross_entropy || cross_entropy_impl(s) != CrossEntropyImpl::torch) return 0;
  return 2.0 * op.activation_bytes_per_sample;
}

int block_index(const std::string& op_name);

// selective_op keeps, besides each block's input, the results it caches (the ops that do not rerun); every op of the
// block saves its own tensors again while the block reruns, as under full.
template <typename In>
KeptActivations kept_activations(const Scenario& s, const std::vector<Op>& ops, const StepPlan& plan, In in) {
  const auto mb = static_cast<double>(s.training.micro_batch);
  const bool selective = s.training.activation_checkpointing == ActivationCheckpointing::selective;
  const bool op_level = s.training.activation_checkpointing == ActivationCheckpointing::selective_op;
  double outside = 0, largest = 0;
  std::map<std::string, double> blocks;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!in(static_cast<int>(i))) continue;
    const double saved = saved_bytes_per_sample(s, ops[i]);
    largest = std::max(largest, loss_backward_transient_bytes(s, ops[i]));  // at the start of the backward
    if (op_level && block_index(ops[i].name) >= 0) {
      blocks[fsdp_unit_of(ops[i].name)] += saved;
      if (!plan.ops[i].recompute_forward) outside += ops[i].output_bytes_per_sample;
    } else if (!plan.ops[i].recompute_forward) {
      outside += saved;
    } else if (selective) {
      outside += ops[i].recompute_kept_bytes_per_sample;
      largest = std::max(largest, saved - ops[i].recompute_kept_bytes_per_sample);  // beside its kept inputs
    } else {
      blocks[fsdp_unit_of(ops[i].name)] += saved;
    }
  }
  if (blocks.empty()) return {outside * mb, largest * mb};
  // Each block's input: replicated over the tensor group, or split along the sequence with sequence parallelism
  // (Korthikanti et al. 2022, Section 4: full recomputation keeps 2sbh, or 2sbh/t); its 1/context of the tokens.
  const double sequence_share =
      (s.parallelism.sequence_parallel ? 1.0 / s.parallelism.tensor : 1.0) / s.parallelism.context;
  const double input = static_cast<double>(s.training.sequence_length) *
                       static_cast<double>(s.model.transformer->hidden_size) * dtype_bytes(s.training.param_dtype) *
                       sequence_share;
  for (const auto& [name, bytes] : blocks) largest = std::max(largest, bytes);
  return {(outside + static_cast<double>(blocks.size()) * input) * mb, largest * mb};
}

// training.activation_checkpointing marks the ops that run their forward again at the start of their backward: full,
// each transformer block's (Korthikanti et al. 2022, arXiv 2205.05198, Section 4, "full activation recomputation";
// torch.utils.checkpoint around each block, as Composer's fsdp_config.activation_checkpointing wraps every FSDP
// unit): the blocks (the unit names of fsdp_unit_of: layers.N, h.N, encoder.layer.N) keep only their input, and the
// ops outside the blocks (embedding, final norm, head, loss) keep theirs; with activation_checkpointing_every N, only
// every N-th block (blocks N-1, 2N-1, ...: torchtitan's layer selective AC counts the blocks it wraps and checkpoints
// those where "_count % ac_freq == 0"), the others keep all theirs; selective, each block's attention core (Section 5,
// "selective activation recomputation"; Megatron-LM's --recompute-granularity selective); selective_op, what
// op_level_saves keeps.

// torchtitan's op-level selective checkpointing (torchtitan 9dec370, torchtitan/parallelisms/parallelize_llama.py
// lines 214-264, _save_list and _custom_policy): inside each checkpointed block it saves the result of the ops in
// _save_list (aten.mm, aten._scaled_dot_product_flash_attention / _efficient_attention, ...) "except every second mm"
// (the 2nd, 4th, ... aten.mm of the block: the count restarts per block, `meta = defaultdict(int)` per checkpoint
// context) and prefers recomputing everything else. A linear with a bias runs aten.addmm, not in the list: rerun, and
// not counted; eager attention's bmm and softmax are not in it either. `mms` counts the block's plain matmuls so far.
bool op_level_saves(const Scenario& s, const Op& op, int& mms) {
  if (op.kind == OpKind::attention) return !is_eager(s.training.attention);
  const bool plain_mm =
      op.kind == OpKind::matmul &&
      std::none_of(op.params.begin(), op.params.end(), [](const auto& p) { return p.name.ends_with(".bias"); });
  return plain_mm && ++mms % 2 == 1;
}

void mark_recomputation(const Scenario& s, const std::vector<Op>& ops, StepPlan& plan) {
  const ActivationCheckpointing c = s.training.activation_checkpointing;
  if (c == ActivationCheckpointing::none) return;
  if (c == ActivationCheckpointing::selective_op) {
    int current = -1, mms = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      const int block = block_index(ops[i].name);
      if (block != current) current = block, mms = 0;
      plan.ops[i].recompute_forward = block >= 0 && !op_level_saves(s, ops[i], mms);
    }
    return;
  }
  const int64_t every = s.training.activation_checkpointing_every;
  for (size_t i = 0; i < ops.size(); ++i) {
    const int block = block_index(ops[i].name);
    const bool full = c == ActivationCheckpointing::full && block >= 0 && (block + 1) % every == 0;
    plan.ops[i].recompute_forward =
        full || (c == ActivationCheckpointing::selective && block >= 0 && ops[i].kind == OpKind::attention);
  }
}

// The transformer block an op belongs to (layers.N, h.N, encoder.layer.N: N), or -1 outside the blocks.
int block_index(const std::string& op_name) {
  const std::string block = fsdp_unit_of(op_name);
  return block.empty() ? -1 : std::stoi(block.substr(block.rfind('.') + 1));
}

// Each op's virtual stage: the blocks as split_layers splits them, what precedes the first block (the embedding) on
// the first, what follows the last (final norm, head, loss) on the last.
std::vector<int> virtual_stages_of(const Scenario& s, const std::vector<Op>& ops) {
  const Parallelism& par = s.parallelism;
  const int vstages = par.pipeline * par.virtual_stages;
  const auto layers = split_layers(static_cast<int>(s.model.transformer->num_layers), par.pipeline, par.virtual_stages,
                                   par.pipeline_layers);
  std::vector<int> vstage_of_block;
  for (int v = 0; v < vstages; ++v) vstage_of_block.insert(vstage_of_block.end(), static_cast<size_t>(layers[v]), v);
  std::vector<int> out(ops.size(), 0);
  bool past_blocks = false;
  for (size_t i = 0; i < ops.size(); ++i) {
    const int b = block_index(ops[i].name);
    if (b >= 0) {
      out[i] = vstage_of_block.at(static_cast<size_t>(b));
      past_blocks = b == static_cast<int>(vstage_of_block.size()) - 1;
    } else {
      out[i] = past_blocks ? vstages - 1 : 0;
    }
  }
  return out;
}

// The pipeline: each op's virtual stage, the schedule, the activations crossing a stage boundary.
PipelinePlan pipeline_plan(const Scenario& s, const std::vector<Op>& ops) {
  const Parallelism& par = s.parallelism;
  PipelinePlan p;
  p.schedule = par.schedule;
  p.stages = par.pipeline;
  p.virtual_stages = par.virtual_stages;
  p.micro_batches = static_cast<int>(std::max<int64_t>(1, s.training.gradient_accumulation));
  if (p.stages == 1) return p;
  p.virtual_stage_of_op = virtual_stages_of(s, ops);
  // Context parallelism sends each GPU's share of the sequence (get_tensor_shapes, schedules.py at d98e8a6
  // :2137-2143: the sequence over the context group's size, then over the tensor group's with sequence parallelism).
  const double sequence = static_cast<double>(s.training.sequence_length) /
                          (par.sequence_parallel ? static_cast<double>(par.tensor) : 1.0) /
                          static_cast<double>(par.context);
  p.boundary_bytes = static_cast<double>(s.training.micro_batch) * sequence *
                     static_cast<double>(s.model.transformer->hidden_size) * dtype_bytes(s.training.param_dtype);
  return p;
}

// The model's FLOPs per sample (matmuls and attention: what MFU counts) and parameters. The stream's dtype (autocast)
// adds casts, which are neither.
void add_model_totals(const std::vector<Op>& whole_model, StepPlan& plan) {
  for (const Op& op : whole_model) {
    if (op.kind == OpKind::matmul || op.kind == OpKind::attention)
      plan.model_flops_per_sample += op.forward_flops_per_sample + op.backward_flops_per_sample;
    for (const ParamTensor& p : op.params) plan.model_parameters += p.numel;
  }
}

}  // namespace

double Sharded::shard_bytes(const ShardUnit& u) const {
  // FSDP pads the flat parameter to a multiple of the group's size (_get_reduce_scatter_tensors).
  const double per_param = u.parameters > 0 ? u.reduce_bytes / static_cast<double>(u.parameters) : 0.0;
  return std::ceil(static_cast<double>(u.parameters) / shards) * per_param;
}

StepPlan make_step_plan(const Scenario& s) {
  StepPlan plan;
  plan.scenario = s.name;
  plan.world_size = s.world_size();
  plan.micro_batch = s.training.micro_batch;
  plan.sequence_length = s.training.sequence_length;
  plan.gradient_accumulation = s.training.gradient_accumulation;
  plan.samples_per_step = s.samples_per_step();
  plan.overlap_grad_reduce = s.ddp.overlap_grad_reduce;
  plan.tp_comm_overlap = s.parallelism.tp_comm_overlap;
  plan.dims = {s.data_parallel(), s.parallelism.tensor, s.parallelism.pipeline,
               s.parallelism.hybrid ? s.parallelism.shard_group : 0, s.parallelism.context};
  check_dims(plan.dims);
  if (plan.dims.world() != plan.world_size)
    throw InputError(fmt::format("{}: data {} x tensor {} x context {} x pipeline {} is not the world of {}", s.name,
                                 plan.dims.data, plan.dims.tensor, plan.dims.context, plan.dims.pipeline,
                                 plan.world_size));
  const double act_bytes = dtype_bytes(s.training.compute());
  const auto model_ops = [&](const TensorSplit& split) {
    return finetune_ops(
        build_ops(s.model, s.training.sequence_length, s.training.compute(), split, s.training.param_dtype,
                  s.training.elementwise == ElementwiseImpl::eager ? &s.topology.gpu.eager_elementwise : nullptr),
        s.training, act_bytes);
  };
  const TensorSplit split{s.parallelism.tensor, s.parallelism.sequence_parallel, s.parallelism.pipeline > 1,
                          s.parallelism.tensor_impl == TensorImpl::torch, s.parallelism.context};
  std::vector<Op> local = model_ops(split);
  // The whole model's FLOPs and parameters, unsplit: the same ops when nothing splits them.
  const bool unsplit = split.degree == 1 && !split.sequence_parallel && !split.tied_head_copy && split.context == 1;
  add_model_totals(unsplit ? local : model_ops({}), plan);
  const auto ops = with_fp8_casts(with_layout_transposes(with_autocast_casts(std::move(local), s.training), s.training,
                                                         s.topology.gpu.nchw_transpose_passes_per_call),
                                  s.training);
  const int grad_bytes = dtype_bytes(trainable_dtypes(s.training).grads);
  for (const auto& op : ops) plan.ops.push_back(to_plan_op(op, s.training.micro_batch));
  mark_recomputation(s, ops, plan);
  plan.pipeline = pipeline_plan(s, ops);
  for (int i = static_cast<int>(ops.size()) - 1; i >= 0; --i) plan.backward_order.push_back(i);

  const Sharding sharding = s.parallelism.sharding;
  const bool deepspeed = deepspeed_zero(s);
  // DDP-style gradient buckets: DDP's, zero1's, DeepSpeed's (stages 1 and 2)
  const bool bucketed = deepspeed || sharding == Sharding::none || sharding == Sharding::zero1;
  std::vector<int64_t> ready_bytes;
  for (const auto& [op_index, it] : gradient_ready_order(s.model, ops, plan.backward_order)) {
    {
      plan.parameters += it->numel;
      if (!it->trainable) continue;  // frozen: no gradient (core/trainable.cpp)
      Grad g{it->name, it->numel, it->numel * grad_bytes, op_index, 0};
      plan.ops[static_cast<size_t>(op_index)].grads.push_back(static_cast<int>(plan.grads.size()));
      // DDP copies each gradient into its bucket and divides by the world size: read + write (DeepSpeed copies it
      // into its contiguous bucket buffer, stage_1_and_2.py:958-964). FSDP's gradients are views of its flat
      // parameter's gradient, reduce-scattered in place.
      if (bucketed) {
        plan.ops[static_cast<size_t>(op_index)].backward_bytes += 2.0 * static_cast<double>(g.bytes);
        plan.ops[static_cast<size_t>(op_index)].grad_copy_bytes += 2.0 * static_cast<double>(g.bytes);
      }
      plan.trainable_parameters += g.numel;
      plan.gradient_bytes += g.bytes;
      if (ops[static_cast<size_t>(op_index)].tied_copy)
        plan.pipeline.embedding_grad_bytes += static_cast<double>(g.bytes);
      ready_bytes.push_back(g.bytes);
      plan.grads.push_back(std::move(g));
    }
  }

  std::vector<int> position(ops.size());
  for (size_t k = 0; k < plan.backward_order.size(); ++k)
    position[static_cast<size_t>(plan.backward_order[k])] = static_cast<int>(k);
  // Each pipeline stage buckets its own gradients (its data-parallel groups reduce them), stage by stage.
  std::vector<std::vector<int>> bucket_grads;
  for (int stage = 0; stage < plan.pipeline.stages; ++stage) {
    std::vector<int> mine;  // the stage's gradients, in ready order
    for (size_t g = 0; g < plan.grads.size(); ++g)
      if (plan.pipeline.stage_of(plan.grads[g].op) == stage) mine.push_back(static_cast<int>(g));
    std::vector<int64_t> mine_bytes;
    for (int g : mine) mine_bytes.push_back(ready_bytes[static_cast<size_t>(g)]);
    const auto groups = !bucketed   ? std::vector<std::vector<int>>{}
                        : deepspeed ? deepspeed_bucket_grads(s, plan.grads)
                        : s.ddp.first_iteration
                            ? std::vector<std::vector<int>>{}
                            : assign_buckets(mine_bytes, s.ddp.first_bucket_bytes, s.ddp.bucket_cap_bytes);
    for (const auto& group : groups) {
      bucket_grads.emplace_back();
      for (int i : group) bucket_grads.back().push_back(deepspeed ? i : mine[static_cast<size_t>(i)]);
    }
    if (bucketed && !deepspeed && s.ddp.first_iteration && !mine.empty())  // iteration 0: one bucket for everything
      bucket_grads.push_back(mine);
  }
  for (const auto& members : bucket_grads) {
    Bucket b;
    b.index = static_cast<int>(plan.buckets.size());
    b.stage = members.empty() ? 0 : plan.pipeline.stage_of(plan.grads[static_cast<size_t>(members.front())].op);
    b.grads = members;
    for (int g : members) {
      b.bytes += plan.grads[static_cast<size_t>(g)].bytes;
      plan.grads[static_cast<size_t>(g)].bucket = b.index;
      b.ready_after_backward_op =
          std::max(b.ready_after_backward_op, position[static_cast<size_t>(plan.grads[static_cast<size_t>(g)].op)]);
    }
    plan.buckets.push_back(std::move(b));
  }

  plan_sharding(s, ops, plan);
  // What each stage holds, updates and keeps; the plan's own figures are the stage that needs the most memory.
  const TrainableDtypes dtypes = trainable_dtypes(s.training);
  const ModelStateParts parts =
      model_state_parts(dtypes.weights, dtypes.grads, s.training.optimizer, s.training.master_weights);
  const auto slots = pipeline_schedule(plan.pipeline.schedule, plan.pipeline.stages, plan.pipeline.micro_batches,
                                       plan.pipeline.virtual_stages);
  for (int stage = 0; stage < plan.pipeline.stages; ++stage) {
    StageNeed need;
    int64_t tensors = 0, grad_bytes_held = 0;
    for (const Grad& g : plan.grads)
      if (plan.pipeline.stage_of(g.op) == stage) need.parameters += g.numel, grad_bytes_held += g.bytes, ++tensors;
    if (bucketed && !deepspeed && !s.ddp.gradient_as_bucket_view)
      need.final_copy_bytes = 2.0 * static_cast<double>(grad_bytes_held);
    need.optimizer = optimizer_step(s, need.parameters, tensors, plan.sharded);
    double frozen_bytes = 0;
    for (size_t o = 0; o < ops.size(); ++o) {
      if (plan.pipeline.stage_of(static_cast<int>(o)) != stage) continue;
      for (const ParamTensor& p : ops[o].params) {
        if (p.trainable) continue;
        need.frozen_parameters += p.numel;
        frozen_bytes += static_cast<double>(p.numel) * frozen_bytes_per_parameter(s.training, ops[o]);
      }
    }
    need.memory.model_state_bytes =
        sharded_model_state_bytes(static_cast<double>(need.parameters), parts, sharding, plan.sharded.shards) +
        frozen_weight_bytes(frozen_bytes, sharding, plan.sharded.shards) + frozen_gradient_bytes(plan, parts, stage);
    need.memory.ddp_buffer_bytes = deepspeed                                    ? deepspeed_bucket_buffer_bytes(s)
                                   : bucketed && !s.ddp.gradient_as_bucket_view ? static_cast<double>(grad_bytes_held)
                                                                                : 0.0;
    need.in_flight = plan.pipeline.stages > 1 ? max_in_flight(slots[static_cast<size_t>(stage)]) : 1;
    std::vector<double> kept(static_cast<size_t>(plan.pipeline.virtual_stages), 0.0);
    double largest = 0;
    for (int chunk = 0; chunk < plan.pipeline.virtual_stages; ++chunk) {
      const auto a = kept_activations(s, ops, plan, [&](int o) {
        return plan.pipeline.stage_of(o) == stage && plan.pipeline.chunk_of(o) == chunk;
      });
      kept[static_cast<size_t>(chunk)] = a.kept;
      largest = std::max(largest, a.largest);
    }
    const double held = plan.pipeline.stages > 1 ? peak_held_bytes(slots[static_cast<size_t>(stage)], kept) : kept[0];
    need.memory.activation_bytes = s.training.activations ? held + largest : 0.0;
    for (size_t o = 0; o < ops.size(); ++o)
      if (plan.pipeline.stage_of(static_cast<int>(o)) == stage)
        need.memory.weight_copy_bytes += ops[o].weight_copy_bytes;
    need.memory.unsharded_bytes = unsharded_in_flight_bytes(plan, parts, fsdp_reduce_bytes(s), stage);
    plan.pipeline.stage.push_back(need);
  }
  const auto most = std::max_element(
      plan.pipeline.stage.begin(), plan.pipeline.stage.end(),
      [](const StageNeed& a, const StageNeed& b) { return a.memory.total_bytes() < b.memory.total_bytes(); });
  plan.optimizer = most->optimizer;
  plan.final_copy_bytes = most->final_copy_bytes;
  plan.memory = most->memory;
  return plan;
}

const OptimizerStep& optimizer_of(const StepPlan& plan, int stage) {
  if (stage < 0 || plan.pipeline.stages == 1) return plan.optimizer;
  return plan.pipeline.stage.at(static_cast<size_t>(stage)).optimizer;
}

double final_copy_bytes_of(const StepPlan& plan, int stage) {
  if (stage < 0 || plan.pipeline.stages == 1) return plan.final_copy_bytes;
  return plan.pipeline.stage.at(static_cast<size_t>(stage)).final_copy_bytes;
}

}  // namespace dpsim
