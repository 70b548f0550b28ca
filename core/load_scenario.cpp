// Loading of scenarios/*.yaml: model, training, DDP, cluster (a topology with overrides), collective.
#include <algorithm>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dpsim/collective_algorithm.hpp"
#include "dpsim/cost.hpp"
#include "dpsim/error.hpp"
#include "dpsim/escape.hpp"
#include "dpsim/load.hpp"
#include "dpsim/model.hpp"
#include "dpsim/nccl_release.hpp"
#include "dpsim/sharding.hpp"
#include "dpsim/suggest.hpp"
#include "dpsim/sweep_spec.hpp"
#include "load_internal.hpp"

namespace dpsim {

namespace fs = std::filesystem;

Dtype parse_dtype(const YNode& n) {
  return n.as_enum<Dtype>({{"bf16", Dtype::bf16}, {"fp16", Dtype::fp16}, {"fp32", Dtype::fp32}});
}

namespace {

std::vector<std::string> shipped_topologies() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(data_root() / "topologies", ec)) {
    if (e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// What dpsim models of torch.autocast: a whole model, replicated (DDP or one GPU). Megatron-LM casts the model itself
// (Float16Module), FSDP and DeepSpeed have their own mixed precision (param_dtype with fsdp.reduce_dtype).
void check_autocast(const Scenario& s, const YNode& v) {
  const char* other =
      s.parallelism.tensor > 1 || s.parallelism.pipeline > 1
          ? "tensor and pipeline parallelism (Megatron-LM casts the model, Float16Module: give param_dtype)"
      : s.parallelism.sharding != Sharding::none
          ? "sharded data parallelism (FSDP's MixedPrecision and DeepSpeed's bf16/fp16 modes are "
            "param_dtype with fsdp.reduce_dtype)"
      : s.training.trainable != Trainable::all ? "training.trainable other than all"
                                               : nullptr;
  if (other)
    v.fail(fmt::format("autocast (compute_dtype {} on fp32 parameters) is modelled without {}",
                       to_string(s.training.compute()), other));
  if (s.training.compute() == Dtype::bf16 && s.topology.gpu.peak_bf16_flops_per_s <= 0)
    v.fail(s.topology.gpu.name + " has no bf16 support; use fp16");
}

// training.compute_dtype: the parameters' own dtype (no autocast) or, on fp32 parameters, the 16-bit dtype
// torch.autocast runs matmuls in; its gradients are the parameters' (fp32), so a 16-bit grad_dtype is refused.
Dtype parse_compute_dtype(const YNode& v, const Training& t) {
  const Dtype d = parse_dtype(v);
  if (d == t.param_dtype) return d;
  if (t.param_dtype != Dtype::fp32)
    v.fail(
        fmt::format("autocast runs matmuls in 16 bits on fp32 parameters; param_dtype is {} (give {} or leave "
                    "compute_dtype out)",
                    to_string(t.param_dtype), to_string(t.param_dtype)));
  if (t.grad_dtype != Dtype::fp32)
    v.fail(fmt::format("under autocast the gradients are the fp32 parameters' own; grad_dtype is {}",
                       to_string(t.grad_dtype)));
  return d;
}

Training parse_training(const YNode& n) {
  n.allow_only({"micro_batch",
                "sequence_length",
                "gradient_accumulation",
                "param_dtype",
                "grad_dtype",
                "compute_dtype",
                "optimizer",
                "optimizer_impl",
                "master_weights",
                "attention",
                "activation_checkpointing",
                "elementwise",
                "cross_entropy",
                "activation_checkpointing_every",
                "activations",
                "tf32",
                "fp8",
                "memory_format",
                "total_tokens",
                "total_samples",
                "trainable",
                "frozen_except"});
  Training t;
  t.micro_batch = n.at("micro_batch").as_int(1, 1 << 24);
  if (auto v = n.get("sequence_length")) t.sequence_length = v->as_int(1, 1 << 24);
  if (auto v = n.get("gradient_accumulation")) t.gradient_accumulation = v->as_int(1, 1 << 20);
  if (auto v = n.get("param_dtype")) t.param_dtype = parse_dtype(*v);
  t.grad_dtype = t.param_dtype;
  if (auto v = n.get("grad_dtype")) t.grad_dtype = parse_dtype(*v);
  if (auto v = n.get("compute_dtype"))
    if (const Dtype d = parse_compute_dtype(*v, t); d != t.param_dtype) t.compute_dtype = d;
  if (auto v = n.get("optimizer")) {
    t.optimizer = v->as_enum<Optimizer>(
        {{"adamw", Optimizer::adamw}, {"sgd_momentum", Optimizer::sgd_momentum}, {"sgd", Optimizer::sgd}});
  }
  if (auto v = n.get("optimizer_impl")) {
    t.optimizer_impl = v->as_enum<OptimizerImpl>(
        {{"foreach", OptimizerImpl::foreach}, {"fused", OptimizerImpl::fused}, {"forloop", OptimizerImpl::forloop}});
  }
  if (auto v = n.get("master_weights")) {
    t.master_weights = v->as_bool();
    if (dtype_bytes(t.param_dtype) >= 4)
      v->fail(
          fmt::format("applies to 16-bit parameters (training.param_dtype {}): fp32 parameters are updated in "
                      "place, with no master copy to keep or drop",
                      to_string(t.param_dtype)));
  }
  if (auto v = n.get("attention"))
    t.attention = v->as_enum<AttentionImpl>({{"flash", AttentionImpl::flash},
                                             {"flash2", AttentionImpl::flash},
                                             {"flash1", AttentionImpl::flash1},
                                             {"triton", AttentionImpl::flash1},
                                             {"cudnn", AttentionImpl::cudnn},
                                             {"eager", AttentionImpl::eager},
                                             {"eager_16bit", AttentionImpl::eager_16bit}});
  if (auto v = n.get("activation_checkpointing")) {
    t.activation_checkpointing =
        v->as_enum<ActivationCheckpointing>({{"none", ActivationCheckpointing::none},
                                             {"selective", ActivationCheckpointing::selective},
                                             {"full", ActivationCheckpointing::full},
                                             {"selective_op", ActivationCheckpointing::selective_op}});
  }
  if (auto v = n.get("elementwise"))
    t.elementwise = v->as_enum<ElementwiseImpl>({{"eager", ElementwiseImpl::eager}, {"fused", ElementwiseImpl::fused}});
  if (auto v = n.get("cross_entropy"))
    t.cross_entropy =
        v->as_enum<CrossEntropyImpl>({{"torch", CrossEntropyImpl::torch}, {"fused", CrossEntropyImpl::fused}});
  if (auto v = n.get("activation_checkpointing_every")) {
    t.activation_checkpointing_every = v->as_int(1, 1 << 20);
    if (t.activation_checkpointing != ActivationCheckpointing::full)
      v->fail(fmt::format("checkpoints every N-th block under full recomputation; activation_checkpointing is {}",
                          to_string(t.activation_checkpointing)));
  }
  if (auto v = n.get("activations")) t.activations = v->as_bool();
  if (auto v = n.get("tf32")) {
    t.tf32 = v->as_bool();
    if (t.tf32 && t.compute() != Dtype::fp32)
      v->fail(fmt::format("TF32 applies to fp32 matmuls; they run in {}", to_string(t.compute())));
  }
  if (auto v = n.get("fp8")) {
    t.fp8 = v->as_bool();
    if (t.fp8 && dtype_bytes(t.compute()) != 2)
      v->fail(
          fmt::format("FP8 GEMMs run inside a 16-bit compute dtype (Transformer Engine's fp8_autocast within "
                      "bf16 or fp16); the matmuls here run in {}",
                      to_string(t.compute())));
    if (t.fp8 && t.autocast())
      v->fail(
          "FP8 with autocast's fp32 weights (compute_dtype on fp32 parameters) is not modelled: give 16-bit "
          "parameters (param_dtype bf16), as Megatron-LM runs Transformer Engine");
  }
  if (auto v = n.get("memory_format"))
    t.memory_format = v->as_enum<MemoryFormat>({{"channels_first", MemoryFormat::channels_first},
                                                {"channels_last", MemoryFormat::channels_last},
                                                {"nchw", MemoryFormat::channels_first},
                                                {"nhwc", MemoryFormat::channels_last}});
  if (auto v = n.get("total_tokens")) t.total_tokens = v->as_positive_number();
  if (auto v = n.get("total_samples")) {
    if (t.total_tokens) v->fail("give training.total_tokens or training.total_samples, not both");
    t.total_samples = v->as_positive_number();
  }
  return t;
}

Ddp parse_ddp(const YNode& n) {
  n.allow_only({"bucket_cap", "first_bucket", "gradient_as_bucket_view", "static_graph", "first_iteration",
                "overlap_grad_reduce"});
  Ddp d;
  if (auto v = n.get("bucket_cap")) d.bucket_cap_bytes = v->as_bytes();
  if (auto v = n.get("first_bucket")) d.first_bucket_bytes = v->as_bytes();
  if (auto v = n.get("gradient_as_bucket_view")) d.gradient_as_bucket_view = v->as_bool();
  if (auto v = n.get("static_graph")) d.static_graph = v->as_bool();
  if (auto v = n.get("first_iteration")) d.first_iteration = v->as_bool();
  if (auto v = n.get("overlap_grad_reduce")) d.overlap_grad_reduce = v->as_bool();
  return d;
}

Collective parse_collective(const YNode& n) {
  n.allow_only({"algorithm", "protocol", "nccl_release", "collnet"});
  Collective c;
  if (auto v = n.get("collnet")) c.collnet = v->as_bool();
  if (auto v = n.get("algorithm")) {
    c.algorithm = algorithm_value(*v, true);
  }
  if (auto v = n.get("protocol")) {
    c.protocol = v->as_enum<Protocol>({{"auto", Protocol::automatic},
                                       {"ll", Protocol::ll},
                                       {"ll128", Protocol::ll128},
                                       {"simple", Protocol::simple}});
  }
  return c;
}

// parallelism.tensor: Megatron-LM's tensor parallelism inside a node. Megatron asserts the heads divide evenly
// (megatron/core/transformer/attention.py: divide(num_attention_heads, world_size), and the query groups likewise)
// and so does the MLP's hidden size (ColumnParallelLinear: divide(output_size, world_size)); the vocabulary is padded
// (make_vocab_size_divisible_by), so it need not divide.
int parse_tensor(const YNode& v, const Topology& t, const ModelSpec& model) {
  const auto degree = static_cast<int>(v.as_int(-(1 << 24), 1 << 24));
  if (degree < 1) v.fail(fmt::format("the tensor-parallel degree must be >= 1, got {}", degree));
  if (degree == 1) return 1;
  if (degree > t.gpus_per_node || t.gpus_per_node % degree != 0)
    v.fail(fmt::format("tensor parallelism stays inside a node: {} must divide its {} GPUs ({})", degree,
                       t.gpus_per_node, t.name));
  if (!model.transformer)
    v.fail(fmt::format("{} is given as explicit layers; tensor parallelism splits a transformer's blocks", model.name));
  const TransformerConfig& c = *model.transformer;
  const std::pair<const char*, int64_t> sizes[] = {
      {"attention heads", c.num_heads}, {"key/value heads", c.num_kv_heads}, {"MLP width", c.intermediate_size}};
  for (const auto& [what, size] : sizes)
    if (size % degree != 0)
      v.fail(fmt::format("{} tensor-parallel GPUs do not divide {}'s {} {} (Megatron splits them evenly)", degree,
                         model.name, size, what));
  return degree;
}

// parallelism.context: the GPUs that split each sample's sequence (Megatron-Core's context parallelism, p2p). Its rules
// are checked with the training block (check_context).
int parse_context(const YNode& v) {
  const auto degree = static_cast<int>(v.as_int(-(1 << 24), 1 << 24));
  if (degree < 1) v.fail(fmt::format("the context-parallel degree must be >= 1, got {}", degree));
  return degree;
}

// parallelism.pipeline, schedule, virtual_stages, pipeline_layers: the stages must hold the world and the blocks
// (core/pipeline_schedule.cpp split_layers, Megatron's rules; the micro-batch rule is checked with the training block).
void parse_pipeline(const YNode& n, const Topology& t, const ModelSpec& model, Parallelism& p) {
  if (auto v = n.get("pipeline")) {
    const auto stages = static_cast<int>(v->as_int(-(1 << 24), 1 << 24));
    if (stages < 1) v->fail(fmt::format("the pipeline needs at least 1 stage, got {}", stages));
    if (t.world_size() % (stages * p.tensor * p.context) != 0)
      v->fail(fmt::format("{} stages x tensor {}{} do not divide the cluster's {} GPUs", stages, p.tensor,
                          p.context > 1 ? fmt::format(" x context {}", p.context) : "", t.world_size()));
    if (stages > 1 && !model.transformer)
      v->fail(fmt::format("{} is given as explicit layers; pipeline stages split a transformer's blocks", model.name));
    p.pipeline = stages;
  }
  if (auto v = n.get("schedule"))
    p.schedule = v->as_enum<PipelineSchedule>({{"gpipe", PipelineSchedule::gpipe},
                                               {"1f1b", PipelineSchedule::one_f_one_b},
                                               {"interleaved_1f1b", PipelineSchedule::interleaved_one_f_one_b}});
  if (auto v = n.get("virtual_stages")) p.virtual_stages = static_cast<int>(v->as_int(1, 1 << 16));
  if (auto v = n.get("pipeline_layers")) {
    if (!v->is_sequence()) v->fail("a list of transformer blocks per virtual stage, in model order");
    for (size_t i = 0; i < v->size(); ++i) p.pipeline_layers.push_back(static_cast<int>((*v)[i].as_int(0, 1 << 20)));
  }
  // Without stages, a schedule other than the default, chunks or a layer split would be ignored: refused.
  if (p.pipeline == 1) {
    const char* key = p.schedule != PipelineSchedule::one_f_one_b ? "schedule"
                      : p.virtual_stages != 1                     ? "virtual_stages"
                      : n.has("pipeline_layers")                  ? "pipeline_layers"
                                                                  : nullptr;
    if (key) n.at(key).fail("applies to pipeline parallelism: give parallelism.pipeline > 1");
  }
  if (p.pipeline == 1) return;
  try {
    split_layers(static_cast<int>(model.transformer->num_layers), p.pipeline, p.virtual_stages, p.pipeline_layers);
  } catch (const InputError& e) {
    n.at(n.has("pipeline_layers") ? "pipeline_layers" : "pipeline").fail(e.what());
  }
}

// The data degree a stated `parallelism.data` must equal: the world over the tensor, context and pipeline degrees.
std::string data_degree_mismatch(int world_size, const Parallelism& p) {
  const int data = world_size / p.model_parallel_gpus();
  std::string split;
  if (p.tensor > 1) split += fmt::format(" / tensor {}", p.tensor);
  if (p.context > 1) split += fmt::format(" / context {}", p.context);
  if (p.pipeline > 1) split += fmt::format(" / pipeline {}", p.pipeline);
  if (split.empty()) return fmt::format("data-parallel GPUs must be the cluster's {}; give auto or {}", data, data);
  return fmt::format("data-parallel GPUs must be the cluster's {} GPUs{} = {}; give auto or {}", world_size, split,
                     data, data);
}

// parallelism: data-parallel sharding. The FSDP names map to the ZeRO stage they implement (api.py docstring);
// HYBRID_SHARD and _HYBRID_SHARD_ZERO2 are zero3 and zero2 inside each shard group, replicated across the groups.
// Tensor parallelism takes `tensor` GPUs of each node; the data-parallel degree is the rest of the world.
Parallelism parse_parallelism(const YNode& n, const Topology& t, const ModelSpec& model) {
  n.allow_only({"data", "sharding", "shard_group", "tensor", "sequence_parallel", "tp_comm_overlap", "tensor_impl",
                "context", "pipeline", "schedule", "virtual_stages", "pipeline_layers"});
  Parallelism p;
  if (auto v = n.get("tensor")) p.tensor = parse_tensor(*v, t, model);
  if (auto v = n.get("context")) p.context = parse_context(*v);
  if (auto v = n.get("sequence_parallel")) {
    p.sequence_parallel = v->as_bool();
    if (p.sequence_parallel && p.tensor == 1)
      v->fail(
          "sequence parallelism splits the tensor-parallel group's norms along the sequence; it needs "
          "parallelism.tensor > 1");
  }
  if (auto v = n.get("tp_comm_overlap")) {
    // true and false: the boolean this key was before `backward` (userbuffers and none)
    p.tp_comm_overlap = v->as_enum<TpCommOverlap>({{"none", TpCommOverlap::none},
                                                   {"backward", TpCommOverlap::backward},
                                                   {"userbuffers", TpCommOverlap::userbuffers},
                                                   {"true", TpCommOverlap::userbuffers},
                                                   {"false", TpCommOverlap::none}});
    if (p.tp_comm_overlap == TpCommOverlap::userbuffers && !p.sequence_parallel)
      v->fail(
          "userbuffers: Transformer Engine overlaps the sequence-parallel all-gathers and reduce-scatters with the "
          "GEMMs beside them; it needs parallelism.sequence_parallel: true (and parallelism.tensor > 1)");
    if (p.tp_comm_overlap == TpCommOverlap::backward && p.tensor == 1)
      v->fail(
          "backward: the column-parallel linears' backward collectives beside their GEMMs need parallelism.tensor > 1");
  }
  if (auto v = n.get("tensor_impl")) {
    p.tensor_impl = v->as_enum<TensorImpl>({{"megatron", TensorImpl::megatron}, {"torch", TensorImpl::torch}});
    if (p.tensor_impl == TensorImpl::torch && p.tensor == 1)
      v->fail("torch: PyTorch's tensor parallelism splits the layers over parallelism.tensor > 1 GPUs");
    if (p.tensor_impl == TensorImpl::torch && p.tp_comm_overlap != TpCommOverlap::none)
      v->fail(
          fmt::format("torch: parallelism.tp_comm_overlap {} is Megatron-Core's and Transformer Engine's; "
                      "PyTorch's tensor parallelism runs every collective on the compute stream (none)",
                      to_string(p.tp_comm_overlap)));
  }
  parse_pipeline(n, t, model, p);
  const int world = t.world_size() / p.model_parallel_gpus();
  // A context degree that does not divide the world is refused with its own rule (check_context), not as a data
  // degree that a stated data could never match.
  const bool divides = t.world_size() % p.model_parallel_gpus() == 0;
  if (auto v = n.get("data"); v && divides) {
    if (!(v->is_scalar() && v->as_string() == "auto") && v->as_int(1, 1 << 24) != world)
      v->fail(data_degree_mismatch(t.world_size(), p));
  }
  if (auto v = n.get("sharding")) {
    p.sharding = v->as_enum<Sharding>({{"none", Sharding::none},
                                       {"no_shard", Sharding::none},
                                       {"zero1", Sharding::zero1},
                                       {"zero2", Sharding::zero2},
                                       {"shard_grad_op", Sharding::zero2},
                                       {"zero3", Sharding::zero3},
                                       {"full_shard", Sharding::zero3},
                                       {"hybrid_shard", Sharding::zero3},
                                       {"_hybrid_shard_zero2", Sharding::zero2}});
    p.sharding_as_written = v->as_string();
    p.hybrid = p.sharding_as_written == "hybrid_shard" || p.sharding_as_written == "_hybrid_shard_zero2";
  }
  if (auto v = n.get("shard_group")) {
    if (!p.hybrid)
      v->fail(fmt::format(
          "a shard group applies to hybrid sharding (hybrid_shard, _hybrid_shard_zero2), not {}; {} shards over all "
          "{} data-parallel GPUs",
          p.sharding_as_written, p.sharding_as_written, world));
    const int64_t gpus = v->as_int(-(1 << 24), 1 << 24);
    if (gpus < 1) v->fail(fmt::format("a shard group needs at least 1 GPU, got {}", gpus));
    p.shard_group = static_cast<int>(gpus);
    if (world % p.shard_group != 0)
      v->fail(fmt::format("a shard group of {} GPUs does not divide the {} data-parallel GPUs", p.shard_group, world));
  } else if (p.hybrid) {
    // FSDP's default intra-node group: the data-parallel GPUs of one node (all of them without tensor parallelism)
    p.shard_group = t.gpus_per_node / p.tensor;
  }
  return p;
}

Fsdp parse_fsdp(const YNode& n, Sharding sharding) {
  if (sharding != Sharding::zero2 && sharding != Sharding::zero3)
    n.fail(
        fmt::format("FSDP's knobs apply to parallelism.sharding zero2 (shard_grad_op) or zero3 (full_shard), "
                    "not {}",
                    to_string(sharding)));
  n.allow_only({"backward_prefetch", "limit_all_gathers", "reduce_dtype", "wrap_root_ops", "forward_prefetch",
                "reshard_after_forward", "wrap", "wrap_blocks", "no_sync"});
  Fsdp f;
  if (auto v = n.get("backward_prefetch"))
    f.backward_prefetch = v->as_enum<BackwardPrefetch>({{"backward_pre", BackwardPrefetch::backward_pre},
                                                        {"backward_post", BackwardPrefetch::backward_post},
                                                        {"none", BackwardPrefetch::none}});
  if (auto v = n.get("limit_all_gathers")) f.limit_all_gathers = v->as_bool();
  if (auto v = n.get("reduce_dtype")) f.reduce_dtype = parse_dtype(*v);
  if (auto v = n.get("wrap_root_ops")) f.wrap_root_ops = v->as_bool();
  if (auto v = n.get("forward_prefetch")) f.forward_prefetch = v->as_bool();
  if (auto v = n.get("no_sync")) f.no_sync = v->as_bool();
  if (auto v = n.get("reshard_after_forward")) {
    f.reshard_after_forward = v->as_bool();
    if (*f.reshard_after_forward && sharding == Sharding::zero2)
      v->fail(
          "zero2 (shard_grad_op) keeps each unit's weights gathered from its forward to its backward; resharding "
          "after the forward is zero3 (full_shard)");
  }
  if (auto v = n.get("wrap_blocks")) f.wrap_blocks = static_cast<int>(v->as_int(1, 1 << 20));
  if (auto v = n.get("wrap")) {
    const std::string name = v->as_string();
    if (name != "block") f.wrap_module = name;
    if (!f.wrap_module.empty() && f.wrap_blocks > 1)
      v->fail(fmt::format("wrap: {} wraps a submodule of each block; wrap_blocks {} groups whole blocks: give one",
                          name, f.wrap_blocks));
  }
  return f;
}

// A DeepSpeed element count: an integer, written as DeepSpeed configs do (500000000 or 5e8).
int64_t parse_elements(const YNode& n) {
  const double v = n.as_number();
  if (v < 0 || v > 1e15 || v != static_cast<double>(static_cast<int64_t>(v)))
    n.fail("an element count: an integer from 0 to 1e15 (DeepSpeed counts elements, not bytes)");
  return static_cast<int64_t>(v);
}

// DeepSpeed's zero_optimization block (stages 1 and 2; names and defaults: deepspeed/runtime/zero/config.py).
ZeroOptimization parse_zero_optimization(const YNode& n, Sharding sharding, bool fsdp_given) {
  if (sharding == Sharding::zero3)
    n.fail(
        "DeepSpeed's stage 3 (stage3_prefetch_bucket_size, stage3_max_live_parameters, ...) is not modelled; "
        "zero_optimization applies to parallelism.sharding zero1 or zero2 (DeepSpeed stages 1 and 2)");
  if (sharding != Sharding::zero1 && sharding != Sharding::zero2)
    n.fail(fmt::format(
        "DeepSpeed's zero_optimization applies to parallelism.sharding zero1 or zero2 (stages 1 and 2), not {}",
        to_string(sharding)));
  if (fsdp_given) n.fail("give fsdp: (PyTorch FSDP) or zero_optimization: (DeepSpeed), not both");
  // DeepSpeed keys dpsim reads as DeepSpeed's defaults would not hold: named, not "unknown" (config.py).
  for (const std::string& key : n.keys())
    if (key == "contiguous_gradients" || key == "allgather_partitions" || key == "round_robin_gradients" ||
        key.starts_with("offload") || key.starts_with("cpu_offload") || key.starts_with("stage3_") ||
        key.starts_with("zero_quantized") || key == "zero_hpz_partition_size")
      n.at(key).fail(
          "this DeepSpeed knob is not modelled; dpsim models stage, reduce_bucket_size, allgather_bucket_size, "
          "overlap_comm, reduce_scatter, use_multi_rank_bucket_allreduce");
  n.allow_only({"stage", "reduce_bucket_size", "allgather_bucket_size", "overlap_comm", "reduce_scatter",
                "use_multi_rank_bucket_allreduce"});
  ZeroOptimization z;
  if (auto v = n.get("stage")) {
    const int64_t stage = v->as_int(0, 3);
    if (stage != (sharding == Sharding::zero1 ? 1 : 2))
      v->fail(fmt::format("stage {} differs from parallelism.sharding {} (DeepSpeed stage {})", stage,
                          to_string(sharding), sharding == Sharding::zero1 ? 1 : 2));
  }
  if (auto v = n.get("reduce_bucket_size")) z.reduce_bucket_size = parse_elements(*v);
  if (auto v = n.get("allgather_bucket_size")) {
    z.allgather_bucket_size = parse_elements(*v);
    // stage_1_and_2.py:277-281: nccl_start_alignment_factor = 2 (4-byte alignment / sizeof(fp16)), asserted.
    if (z.allgather_bucket_size % 2 != 0)
      v->fail("must be a multiple of 2 (DeepSpeed's nccl_start_alignment_factor, stage_1_and_2.py:277-281)");
  }
  if (auto v = n.get("overlap_comm")) z.overlap_comm = v->as_bool();
  if (auto v = n.get("reduce_scatter")) z.reduce_scatter = v->as_bool();
  if (auto v = n.get("use_multi_rank_bucket_allreduce")) {
    z.use_multi_rank_bucket_allreduce = v->as_bool();
    if (!z.use_multi_rank_bucket_allreduce && z.reduce_scatter)
      v->fail(
          "false with reduce_scatter: true reduces each rank's slices with a dist.reduce to that rank "
          "(stage_1_and_2.py:1141-1147), which dpsim does not model; keep true (DeepSpeed's default)");
  }
  return z;
}

// Pipeline stages with sharded data parallelism: zero1 (Megatron's distributed optimizer), and FSDP's full_shard as
// torchtitan and NeMo Automodel run it under pipelining, every stage's blocks gathered once per step and kept
// (reshard_after_forward false; torchtitan apply_fsdp: "For PP, do not reshard after forward to avoid per-microbatch
// all-gathers, which can be expensive and non-overlapped"), their gradients accumulated unsharded over the
// micro-batches and reduce-scattered after the last one. The rest is refused.
// Context parallelism's rules (context_rule), each reported at its key.
void check_context(const YNode& root, const Scenario& s) {
  const int c = s.parallelism.context;
  const ContextRule rule = context_rule(s, c);
  if (rule == ContextRule::ok) return;
  const YNode& par = root.at("parallelism");  // present: context > 1 came from it
  const YNode& training = root.at("training");
  switch (rule) {
    case ContextRule::ok: return;
    case ContextRule::not_transformer:
      par.at("context").fail(fmt::format(
          "{} is given as explicit layers; context parallelism splits a transformer's attention", s.model.name));
    case ContextRule::world:
      par.at("context").fail(fmt::format(
          "{} context-parallel GPUs x tensor {}{} do not divide the cluster's {} GPUs", c, s.parallelism.tensor,
          s.parallelism.pipeline > 1 ? fmt::format(" x pipeline {}", s.parallelism.pipeline) : "", s.world_size()));
    case ContextRule::sequence:
      (training.has("sequence_length") ? training.at("sequence_length") : par.at("context"))
          .fail(fmt::format("{} tokens do not split into 2 x context = {} equal chunks (Megatron-LM: \"seq-length "
                            "should be a multiple of 2 * context-parallel-size\")",
                            s.training.sequence_length, 2 * c));
    case ContextRule::eager_attention:
      training.at("attention")
          .fail(fmt::format(
              "{}: context parallelism passes keys and values round a ring inside Transformer Engine's flash or fused "
              "attention (or PyTorch's SDPA); give flash or cudnn",
              to_string(s.training.attention)));
    case ContextRule::deepspeed:
      root.at("zero_optimization")
          .fail(
              "DeepSpeed's zero_optimization with parallelism.context is not modelled (Megatron's distributed "
              "optimizer: parallelism.sharding zero1)");
    case ContextRule::hybrid:
      par.at("sharding")
          .fail(fmt::format("{} with parallelism.context is not modelled: FSDP's shard group would cross "
                            "the context ranks (full_shard shards over data x context GPUs)",
                            s.parallelism.sharding_as_written));
  }
}

void check_sharding_with_pipeline(const YNode& root, const Scenario& s) {
  if (s.parallelism.pipeline <= 1) return;
  const Sharding sharding = s.parallelism.sharding;
  if (sharding_modelled_with_pipeline(sharding, s.parallelism.hybrid, s.zero_optimization.has_value()) &&
      !s.fsdp.reshard_after_forward.value_or(false))
    return;
  if (s.zero_optimization)
    root.at("zero_optimization")
        .fail(
            "DeepSpeed's zero_optimization with pipeline parallelism is not modelled yet (zero1, Megatron's "
            "distributed optimizer, and FSDP's full_shard are)");
  if (sharding == Sharding::zero2 || s.parallelism.hybrid)
    root.at("parallelism")
        .at("sharding")
        .fail(fmt::format("{} with pipeline parallelism is not modelled yet (zero1, Megatron's distributed optimizer, "
                          "and full_shard are)",
                          s.parallelism.sharding_as_written));
  if (s.fsdp.reshard_after_forward.value_or(false))
    root.at("fsdp")
        .at("reshard_after_forward")
        .fail(
            "true with pipeline parallelism is not modelled: full_shard under pipelining keeps each stage's blocks "
            "gathered for the whole step (torchtitan and NeMo Automodel turn resharding off with pipeline stages)");
}

// The wrapping must name what the model has: a submodule with parameters that some block holds, no more blocks per
// unit than the model has blocks.
void check_fsdp_wrap(const Scenario& s, const YNode& fsdp) {
  if (s.fsdp.wrap_module.empty() && s.fsdp.wrap_blocks == 1) return;
  const auto ops = build_ops(s.model, s.training.sequence_length, s.training.param_dtype);
  std::set<std::string> blocks, names;  // names: the first block's submodules with parameters, for the message
  bool wraps_parameters = false;
  for (const Op& op : ops) {
    const std::string b = fsdp_unit_of(op.name);
    if (b.empty()) continue;
    blocks.insert(b);
    if (b == *blocks.begin() && op.name.size() > b.size() && !op.params.empty()) {
      const std::string rest = op.name.substr(b.size() + 1);
      names.insert(rest.substr(0, rest.find('.')));
    }
    wraps_parameters |= !op.params.empty() && !fsdp_wrapped_unit_of(op.name, 1, s.fsdp.wrap_module).empty();
  }
  if (blocks.empty())
    fsdp.at(s.fsdp.wrap_module.empty() ? "wrap_blocks" : "wrap")
        .fail(fmt::format("{} has no transformer blocks to wrap", s.model.name));
  if (!s.fsdp.wrap_module.empty() && !wraps_parameters)
    fsdp.at("wrap").fail(
        fmt::format("{} has no module named \"{}\" with parameters in its blocks (block, or one of: {})", s.model.name,
                    s.fsdp.wrap_module, fmt::join(names, ", ")));
  if (s.fsdp.wrap_blocks > static_cast<int>(blocks.size()))
    fsdp.at("wrap_blocks")
        .fail(fmt::format("{} blocks per unit, but {} has {} transformer block(s)", s.fsdp.wrap_blocks, s.model.name,
                          blocks.size()));
}

}  // namespace

void rethrow_at_key(const YNode& key, const fs::path& file, const InputError& error) {
  if (error.key_path().empty() && std::string(error.what()) == escape_controls(file.string()) + ": " + error.message())
    key.fail(error.what());
  throw error;
}

fs::path find_topology(const std::string& name_or_path, const fs::path& dir) {
  const fs::path file = resolve_topology(name_or_path, dir);
  std::error_code ec;
  if (fs::exists(file, ec)) return file;
  const bool is_path = name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".yaml");
  if (is_path) throw InputError(fmt::format("topology file {} does not exist", file.lexically_normal().string()));
  const auto shipped = shipped_topologies();
  throw InputError(fmt::format("no topology named \"{}\"{} (shipped: {})", name_or_path,
                               did_you_mean(name_or_path, shipped), fmt::join(shipped, ", ")));
}

namespace {

Topology load_cluster(const YNode& n, const fs::path& dir) {
  n.allow_only(
      {"topology", "nodes", "gpus_per_node", "gpu", "nic_bandwidth", "oversubscription", "price_per_gpu_hour"});
  const YNode name = n.at("topology");
  fs::path file;
  try {
    file = find_topology(name.as_string(), dir);
  } catch (const InputError& e) {
    name.fail(e.what());
  }
  Topology t = [&] {
    try {
      return load_topology(file);
    } catch (const InputError& e) {
      rethrow_at_key(name, file, e);
    }
  }();
  const int nodes = n.has("nodes") ? static_cast<int>(n.at("nodes").as_int(1, 1 << 20)) : t.nodes;
  const int gpus_per_node =
      n.has("gpus_per_node") ? static_cast<int>(n.at("gpus_per_node").as_int(1, 1024)) : t.gpus_per_node;
  if (auto v = n.get("gpu")) {
    try {
      t.gpu = load_gpu(v->as_string());
    } catch (const InputError& e) {
      v->fail(e.what());
    }
  }
  if (auto v = n.get("nic_bandwidth")) {
    const double bw = v->as_bandwidth();
    if (t.nics.empty()) v->fail(fmt::format("topology \"{}\" has no NICs (nics:) whose bandwidth this sets", t.name));
    for (auto& nic : t.nics) nic.link.bandwidth_bytes_per_s = bw;
  }
  if (auto v = n.get("oversubscription")) {
    t.network.oversubscription = v->as_positive_number();
    if (t.network.oversubscription < 1) v->fail("must be >= 1 (1 = full bisection)");
  }
  return sized_topology(std::move(t), nodes, gpus_per_node,
                        [&](const std::string& msg) { n.fail(msg + " (topology " + file.filename().string() + ")"); });
}

// Learned position embeddings (gpt2, bert) have a row per position: a longer sequence has no embedding.
void check_sequence_length(const Scenario& s, const YNode& training) {
  const auto& t = s.model.transformer;
  if (!t || t->family == ModelFamily::llama || t->max_position_embeddings <= 0) return;
  if (s.training.sequence_length <= t->max_position_embeddings) return;
  const std::string why =
      fmt::format("{} tokens, but {} has learned position embeddings for {} (max_position_embeddings)",
                  s.training.sequence_length, s.model.name, t->max_position_embeddings);
  if (auto v = training.get("sequence_length")) v->fail(why);
  training.fail("sequence_length defaults to " + why);
}

// A forced algorithm or protocol NCCL cannot run on this cluster is refused at its line, not mid-simulation:
// the cost model is asked for each collective kind the step runs.
void check_collective_available(const Scenario& s, const YNode& collective) {
  std::vector<CollectiveKind> kinds{CollectiveKind::all_reduce};
  if (s.parallelism.sharding != Sharding::none) kinds = {CollectiveKind::reduce_scatter, CollectiveKind::all_gather};
  if (s.zero_optimization) kinds = {CollectiveKind::all_reduce, CollectiveKind::all_gather};  // DeepSpeed stage 1/2
  if (s.parallelism.hybrid) kinds.push_back(CollectiveKind::all_reduce);  // HSDP's all-reduce across replicas
  const FabricSummary f = summarize_fabric(s.topology);
  for (const CollectiveKind kind : kinds) {
    try {
      collective_cost(kind, 1 << 20, f, s.nccl, s.collective);
    } catch (const InputError&) {
      const std::string why = s.collective.algorithm == Algorithm::automatic
                                  ? std::string()
                                  : algorithm_unavailable_reason(s.collective.algorithm, kind, f, s.nccl);
      collective.fail(fmt::format("algorithm {} with protocol {} is not available for {} on {} ({} node{} x {} GPUs){}",
                                  to_string(s.collective.algorithm), to_string(s.collective.protocol), to_string(kind),
                                  s.topology.name, s.topology.nodes, s.topology.nodes == 1 ? "" : "s",
                                  s.topology.gpus_per_node, why.empty() ? "" : ": " + why));
    }
  }
}

}  // namespace

Scenario load_scenario(const fs::path& file) { return load_scenario(file, {}); }

Scenario load_scenario(const fs::path& file, const std::vector<Override>& overrides) {
  YNode root = YNode::load_file(file, overrides.empty() ? Nodes::read_only : Nodes::changed_by_caller);
  for (const auto& o : overrides) root.set_path(o.key_path, o.value);
  root.allow_only({"name", "description", "model", "training", "ddp", "parallelism", "fsdp", "cluster", "collective",
                   "validation", "nccl", "zero_optimization", "lora"});
  const fs::path dir = file.parent_path().empty() ? fs::path(".") : file.parent_path();
  Scenario s;
  s.file = file.string();
  s.name = root.has("name") ? root.at("name").as_string() : file.stem().string();
  s.model = parse_model_node(root.at("model"), dir);
  s.training = parse_training(root.at("training"));
  check_sequence_length(s, root.at("training"));
  if (auto v = root.get("ddp")) s.ddp = parse_ddp(*v);
  if (s.training.total_tokens && !s.model.transformer)
    root.at("training")
        .at("total_tokens")
        .fail(fmt::format("{} is given as explicit layers, which have no tokens; give training.total_samples",
                          s.model.name));
  if (s.training.activation_checkpointing != ActivationCheckpointing::none && !s.model.transformer)
    root.at("training")
        .at("activation_checkpointing")
        .fail(fmt::format("{} is given as explicit layers, whose blocks' inputs and attention cores dpsim does not "
                          "know; {} recomputation needs a transformer model",
                          s.model.name, to_string(s.training.activation_checkpointing)));
  if (s.model.transformer && s.training.activation_checkpointing_every > s.model.transformer->num_layers)
    root.at("training")
        .at("activation_checkpointing_every")
        .fail(fmt::format("{} is above {}'s {} blocks: no block would be checkpointed",
                          s.training.activation_checkpointing_every, s.model.name, s.model.transformer->num_layers));
  s.topology = load_cluster(root.at("cluster"), dir);
  if (auto v = root.at("cluster").get("price_per_gpu_hour")) s.price_per_gpu_hour = v->as_positive_number();
  if (auto v = root.get("parallelism")) {
    s.parallelism = parse_parallelism(*v, s.topology, s.model);
    if (s.parallelism.pipeline > 1) {  // micro-batches per pipeline: training.gradient_accumulation
      try {
        check_pipeline_schedule(s.parallelism.schedule, s.parallelism.pipeline,
                                static_cast<int>(s.training.gradient_accumulation), s.parallelism.virtual_stages);
      } catch (const InputError& e) {
        v->at(v->has("schedule") ? "schedule" : "pipeline")
            .fail(fmt::format("{} (micro-batches per pipeline: training.gradient_accumulation)", e.what()));
      }
    }
  }
  if (auto v = root.get("fsdp")) {
    s.fsdp = parse_fsdp(*v, s.parallelism.sharding);
    check_fsdp_wrap(s, *v);
  }
  if (auto v = root.get("zero_optimization"))
    s.zero_optimization = parse_zero_optimization(*v, s.parallelism.sharding, root.has("fsdp"));
  check_sharding_with_pipeline(root, s);
  check_context(root, s);
  if (s.zero_optimization && !s.training.master_weights)
    root.at("training")
        .at("master_weights")
        .fail(
            "false with DeepSpeed's zero_optimization is not modelled: its bf16 and fp16 optimizers keep fp32 master "
            "weights and state");

  if (!s.ddp.overlap_grad_reduce &&
      (s.zero_optimization || s.parallelism.sharding == Sharding::zero2 || s.parallelism.sharding == Sharding::zero3))
    root.at("ddp")
        .at("overlap_grad_reduce")
        .fail(fmt::format("applies to DDP buckets (parallelism.sharding none or zero1); {} orders its own reductions{}",
                          s.zero_optimization ? "DeepSpeed's zero_optimization" : s.parallelism.sharding_as_written,
                          s.zero_optimization ? " (zero_optimization.overlap_comm)" : ""));

  parse_trainable(root, s);
  if (s.training.tf32 && !(s.topology.gpu.peak_tf32_flops_per_s > 0))
    root.at("training")
        .at("tf32")
        .fail(fmt::format("{} has no TF32 tensor cores (data/gpus/{}.yaml has no peak_tf32)", s.topology.gpu.name,
                          s.topology.gpu.key));
  if (s.training.fp8 && !(s.topology.gpu.peak_fp8_flops_per_s > 0))
    root.at("training")
        .at("fp8")
        .fail(fmt::format("{} has no FP8 tensor-core rate in data/gpus/{}.yaml (peak_fp8: FP8 tensor cores came with "
                          "Hopper and Ada; the catalog gives the rate where a source states it)",
                          s.topology.gpu.name, s.topology.gpu.key));
  // flash-attn v1.0.3.post0 README: "FlashAttention currently supports: 1. Turing, Ampere, Ada, or Hopper GPUs".
  if (s.training.attention == AttentionImpl::flash1 && s.topology.gpu.arch == Arch::volta)
    root.at("training")
        .at("attention")
        .fail(fmt::format("FlashAttention v1 (and its Triton port) needs Turing or newer; {} is Volta (use flash: "
                          "PyTorch SDPA's memory-efficient kernel, or eager)",
                          s.topology.gpu.name));
  if (s.training.attention == AttentionImpl::cudnn && !(s.topology.gpu.cudnn_attention_efficiency > 0))
    root.at("training")
        .at("attention")
        .fail(fmt::format("cuDNN's fused attention has no measured rate on {} (data/gpus/{}.yaml has no "
                          "cudnn_attention_efficiency; measured on Hopper only): use flash (FlashAttention-2)",
                          s.topology.gpu.name, s.topology.gpu.key));
  if (auto v = root.get("collective")) s.collective = parse_collective(*v);
  if (auto v = root.get("validation")) {
    v->allow_only({"tolerance"});
    s.tolerance = v->at("tolerance").as_positive_number();
  }
  fs::path nccl_file = data_root() / "data" / "nccl.yaml";
  if (auto v = root.get("nccl")) {
    const fs::path p(v->as_string());
    nccl_file = p.is_absolute() ? p : dir / p;
    std::error_code ec;
    if (!fs::exists(nccl_file, ec)) v->fail(fmt::format("NCCL model file {} does not exist", nccl_file.string()));
  }
  s.nccl = load_nccl(nccl_file);
  if (auto v = root.get("collective"); v && v->has("nccl_release")) {
    const YNode release = v->at("nccl_release");
    s.nccl_release = release.as_string();
    try {
      s.nccl = nccl_for_release(s.nccl, s.nccl_release);
    } catch (const InputError& e) {
      release.fail(e.message());
    }
  }
  if (auto v = root.get("collective")) check_collective_available(s, *v);
  const YNode training = root.at("training");
  if (s.training.param_dtype == Dtype::bf16 && s.topology.gpu.peak_bf16_flops_per_s <= 0) {
    training.at("param_dtype").fail(s.topology.gpu.name + " has no bf16 support; use fp16 or fp32");
  }
  if (s.training.autocast()) check_autocast(s, training.at("compute_dtype"));
  return s;
}

}  // namespace dpsim
