// The buffer plan of one rank (backend/include/dpsim/backend/shard_buffers.hpp): sizes, offsets, and the buffers of
// each collective, for the CUDA executor and the dry run alike.
#include "dpsim/backend/shard_buffers.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "dpsim/error.hpp"
#include "dpsim/units.hpp"

namespace dpsim::backend {

const char* to_string(Buffer buffer) {
  switch (buffer) {
    case Buffer::none: return "-";
    case Buffer::weights: return "weights";
    case Buffer::grads: return "grads";
    case Buffer::weight_shard: return "weight-shard";
    case Buffer::grad_shard: return "grad-shard";
    case Buffer::gathered: return "gathered";
    case Buffer::unit_grads: return "unit-grads";
    case Buffer::tensor_comm: return "tensor-comm";
    case Buffer::p2p_recv: return "p2p-recv";
  }
  return "?";
}

const CallBuffers& ShardBuffers::call(const CommCall& c) const {
  const auto it = calls.find({static_cast<int>(c.kind), static_cast<int>(c.group), c.index});
  if (it == calls.end())
    throw RuntimeError(fmt::format("buffer plan: no buffers for {} #{} over the {} group", dpsim::to_string(c.kind),
                                   c.index, dpsim::to_string(c.group)));
  return it->second;
}

CallBuffers ShardBuffers::p2p(const P2POp& op) const {
  const auto numel = std::max<int64_t>(1, static_cast<int64_t>(op.bytes) / element_bytes);
  if (op.type == P2POp::Type::send && numel <= tensor_comm_numel) return {{Buffer::tensor_comm, 0, numel}, {}, numel};
  if (op.type == P2POp::Type::recv && numel <= p2p_recv_numel) return {{}, {Buffer::p2p_recv, 0, numel}, numel};
  throw RuntimeError(fmt::format("buffer plan: no buffer for a {} of {} elements {} stage {}",
                                 dpsim::to_string(op.type), numel, op.type == P2POp::Type::send ? "to" : "from",
                                 op.peer));
}

namespace {

using Key = std::tuple<int, int, int>;
Key key_of(const CommCall& c) { return {static_cast<int>(c.kind), static_cast<int>(c.group), c.index}; }

[[noreturn]] void no_buffers(const CommCall& c) {
  throw RuntimeError(fmt::format("buffer plan: the backend has no buffers for {} over the {} group{}",
                                 dpsim::to_string(c.kind), dpsim::to_string(c.group),
                                 c.unit >= 0 ? fmt::format(" (unit {})", c.unit) : std::string()));
}

// DDP, zero1 and DeepSpeed's stages 1/2: flat weights and gradients, padded so that every rank's optimizer slice
// (a multiple of 8 elements: 16-byte aligned) lies inside them and zero1's gathers can run in place.
void plan_flat(ShardBuffers& b, const StepPlan& plan, const RankProgram& r, const StepLayout& layout) {
  const int64_t total = std::max<int64_t>(layout.total_numel, 1);
  const int64_t n = b.shards;
  const int64_t updated = r.stage >= 0 ? plan.pipeline.stage.at(static_cast<size_t>(r.stage)).optimizer.parameters
                                       : plan.optimizer.parameters;
  const int64_t opt = plan.sharded.sharding == Sharding::none
                          ? total
                          : std::min<int64_t>(total, (std::max<int64_t>(1, updated) + 7) / 8 * 8);
  const int64_t opt_offset = plan.sharded.sharding == Sharding::none ? 0 : b.rank * opt;
  b.weights_numel = b.grads_numel = std::max(total, opt_offset + opt);
  if (plan.sharded.sharding != Sharding::none) b.weights_numel = b.grads_numel = std::max(total, n * opt);
  b.optimizer = {Buffer::weights, opt_offset, opt};
  b.optimizer_grads = {Buffer::grads, opt_offset, opt};
  b.bucket_base = layout.bucket_offset;
  if (plan.sharded.deepspeed && plan.sharded.sharding == Sharding::zero2) {
    // Bucket k in buffer k % 2 with overlap_comm (the ipg_index swap after each flush), else all in one; a
    // parameter above reduce_bucket_size is reduced from its own gradient (:957-959): a buffer that holds it.
    const int64_t buffers = plan.sharded.overlap_comm ? 2 : 1;
    int64_t largest = 1;
    for (int64_t numel : layout.bucket_numel) largest = std::max(largest, numel);
    for (size_t k = 0; k < b.bucket_base.size(); ++k) b.bucket_base[k] = static_cast<int64_t>(k) % buffers * largest;
    b.grads_numel = buffers * largest;
    b.grad_shard_numel = opt;
    b.optimizer_grads = {Buffer::grad_shard, 0, opt};
  }
  int gathers = 0;  // dpsim's zero1 gathers bucket k's weights in its k-th all-gather (program.cpp)
  for (const CommCall& c : r.comms) {
    if (c.group == GroupKind::tensor || between_stages(c)) continue;  // plan_tensor's
    CallBuffers cb;
    if (c.bucket >= 0) {
      const auto bk = static_cast<size_t>(c.bucket);
      const Span whole{Buffer::grads, b.bucket_base.at(bk), layout.bucket_numel.at(bk)};
      if (c.kind == CollectiveKind::all_reduce) {
        cb = {whole, whole, whole.numel};
      } else if (c.kind == CollectiveKind::reduce_scatter) {  // in place: the rank's slice of its bucket
        const int64_t shard = whole.numel / n;
        cb = {whole, {Buffer::grads, whole.offset + b.rank * shard, shard}, shard};
      } else {
        no_buffers(c);
      }
    } else if (c.kind == CollectiveKind::all_gather && plan.sharded.deepspeed) {  // one gather of every slice
      cb = {b.optimizer, {Buffer::weights, 0, n * opt}, opt};
    } else if (c.kind == CollectiveKind::all_gather && plan.sharded.sharding == Sharding::zero1) {
      const auto bk = static_cast<size_t>(gathers++);
      if (bk >= layout.bucket_offset.size()) no_buffers(c);
      const int64_t count = layout.bucket_numel[bk] / n;
      cb = {{Buffer::weights, layout.bucket_offset[bk] + b.rank * count, count},
            {Buffer::weights, layout.bucket_offset[bk], n * count},
            count};
    } else {
      no_buffers(c);
    }
    b.calls[key_of(c)] = cb;
  }
}

// FSDP: per unit a padded flat parameter, 1/N of it held; the gathered weights and one unit's full gradients. A
// pipeline stage holds its own units only, each gathered and its gradients kept in a region of its own.
void plan_units(ShardBuffers& b, const StepPlan& plan, const RankProgram& r) {
  const int64_t n = b.shards;
  const bool staged = r.stage >= 0;
  b.unit_of_grad.assign(plan.grads.size(), -1);
  b.offset_in_unit.assign(plan.grads.size(), 0);
  std::vector<int64_t> padded;
  for (size_t u = 0; u < plan.sharded.units.size(); ++u) {
    UnitShard us;
    us.held = !staged || plan.sharded.units[u].stage == r.stage;
    for (int o : plan.sharded.units[u].ops)
      for (int g : plan.ops.at(static_cast<size_t>(o)).grads) {
        b.unit_of_grad.at(static_cast<size_t>(g)) = static_cast<int>(u);
        b.offset_in_unit[static_cast<size_t>(g)] = us.numel;
        us.numel += plan.grads[static_cast<size_t>(g)].numel;
      }
    us.shard = us.held ? (us.numel + n - 1) / n : 0;
    us.shard_offset = b.weight_shard_numel;
    b.weight_shard_numel += us.shard;
    padded.push_back(us.shard * n);
    if (staged) us.grad_offset = b.unit_grads_numel, b.unit_grads_numel += padded.back();
    b.units.push_back(us);
  }
  for (size_t g = 0; g < b.unit_of_grad.size(); ++g)
    if (b.unit_of_grad[g] < 0)
      throw RuntimeError("buffer plan: gradient '" + plan.grads[g].name + "' belongs to no FSDP unit");
  b.grad_shard_numel = b.weight_shard_numel;
  if (!staged) b.unit_grads_numel = *std::max_element(padded.begin(), padded.end());
  b.unit_grads_numel = std::max<int64_t>(1, b.unit_grads_numel);

  // Where each unit's gather lands. zero2 and a pipeline stage: a region per unit. zero3: the root's region, then the
  // blocks' slots.
  std::vector<int64_t> region(padded.size(), 0);
  const bool slotted = plan.sharded.sharding == Sharding::zero3 && !staged;
  const bool root = plan.sharded.units.front().name.empty();
  int64_t slot = 0, slots = 0;
  if (!slotted) {
    for (size_t u = 0; u < padded.size(); ++u) region[u] = b.gathered_numel, b.gathered_numel += padded[u];
  } else {
    const size_t first_block = root ? 1 : 0;
    const auto blocks = static_cast<int64_t>(padded.size() - first_block);
    b.gathered_numel = root ? padded.front() : 0;
    for (size_t u = first_block; u < padded.size(); ++u) slot = std::max(slot, padded[u]);
    slots = plan.sharded.limit_all_gathers ? std::min<int64_t>(2, blocks) : blocks;
  }
  const int64_t slots_begin = b.gathered_numel;
  if (slotted) b.gathered_numel += slots * slot;

  int block_gathers = 0;
  b.gathered_at.assign(r.comms.size(), -1);
  for (size_t i = 0; i < r.comms.size(); ++i) {
    const CommCall& c = r.comms[i];
    if (c.group == GroupKind::tensor || between_stages(c)) continue;  // plan_tensor's
    if (c.unit < 0 || c.unit >= static_cast<int>(b.units.size()) || !b.units[static_cast<size_t>(c.unit)].held)
      no_buffers(c);
    const auto u = static_cast<size_t>(c.unit);
    const UnitShard& us = b.units[u];
    const Span shard{Buffer::weight_shard, us.shard_offset, us.shard};
    const Span grad_shard{Buffer::grad_shard, us.shard_offset, us.shard};
    CallBuffers cb;
    switch (c.kind) {
      case CollectiveKind::all_gather: {
        const bool own = !slotted || (root && u == 0);
        const int64_t at = own ? region[u] : slots_begin + (block_gathers++ % std::max<int64_t>(1, slots)) * slot;
        b.gathered_at[i] = at;
        cb = {shard, {Buffer::gathered, at, padded[u]}, us.shard};
        break;
      }
      case CollectiveKind::reduce_scatter:
        cb = {{Buffer::unit_grads, us.grad_offset, padded[u]}, grad_shard, us.shard};
        break;
      case CollectiveKind::all_reduce: cb = {grad_shard, grad_shard, us.shard}; break;  // HSDP: across replicas
      default: no_buffers(c);
    }
    b.calls[key_of(c)] = cb;
  }
  b.optimizer = {Buffer::weight_shard, 0, b.weight_shard_numel};
  b.optimizer_grads = {Buffer::grad_shard, 0, b.grad_shard_numel};
}

// Tensor parallelism: every collective over the tensor group in place in one buffer of the largest one's size.
void plan_tensor(ShardBuffers& b, const RankProgram& r, const StepLayout& layout, int tensor, int tensor_rank) {
  for (const CommCall& c : r.comms) {
    if (between_stages(c)) {  // a stage's activations sent from there, or the tied embedding's gradient
      const auto numel = std::max<int64_t>(1, static_cast<int64_t>(c.bytes) / layout.element_bytes);
      b.tensor_comm_numel = std::max(b.tensor_comm_numel, numel);
      b.calls[key_of(c)] = {{Buffer::tensor_comm, 0, numel}, {Buffer::tensor_comm, 0, numel}, numel};
      continue;
    }
    if (c.group != GroupKind::tensor) continue;
    const auto numel = static_cast<int64_t>(c.bytes) / layout.element_bytes / tensor * tensor;
    const int64_t part = numel / tensor;
    const Span whole{Buffer::tensor_comm, 0, numel}, mine{Buffer::tensor_comm, tensor_rank * part, part};
    b.tensor_comm_numel = std::max(b.tensor_comm_numel, numel);
    switch (c.kind) {
      case CollectiveKind::all_reduce: b.calls[key_of(c)] = {whole, whole, numel}; break;
      case CollectiveKind::all_gather: b.calls[key_of(c)] = {mine, whole, part}; break;
      case CollectiveKind::reduce_scatter: b.calls[key_of(c)] = {whole, mine, part}; break;
      default: no_buffers(c);
    }
  }
}

// A pipeline stage's receives: the largest tensor another stage sends it.
int64_t largest_received(const StepProgram& program, int stage, int element_bytes) {
  int64_t numel = 0;
  for (const RankProgram& r : program.classes)
    for (const CommCall& c : r.comms)
      if (c.kind == CollectiveKind::send && c.peer == stage)
        numel = std::max<int64_t>(numel, std::max<int64_t>(1, static_cast<int64_t>(c.bytes) / element_bytes));
  return numel;
}

}  // namespace

ShardBuffers plan_shard_buffers(const StepPlan& plan, const StepProgram& program, const StepLayout& layout, int rank,
                                int tensor_rank, int stage) {
  if (program.classes.empty()) throw RuntimeError("buffer plan: the program has no rank class");
  const bool staged = program.classes.front().stage >= 0;
  if (stage < 0 || stage >= static_cast<int>(program.classes.size()) || (!staged && stage != 0))
    throw RuntimeError(
        fmt::format("buffer plan: stage {} of a program of {} rank classes", stage, program.classes.size()));
  const RankProgram& r = program.classes[static_cast<size_t>(stage)];
  ShardBuffers b;
  b.element_bytes = layout.element_bytes;
  b.stage = r.stage;
  b.shards = plan.sharded.sharding == Sharding::none ? 1 : std::max(1, plan.sharded.shards);
  // A rank of a larger group (ranks of consecutive shard groups) is its place in its own.
  if (rank < 0 || rank >= b.shards) rank = rank < 0 ? 0 : rank % b.shards;
  b.rank = rank;
  b.fsdp = !plan.sharded.units.empty();
  if (b.fsdp)
    plan_units(b, plan, r);
  else
    plan_flat(b, plan, r, layout);
  plan_tensor(b, r, layout, program.dims.tensor, tensor_rank % program.dims.tensor);
  if (staged) b.p2p_recv_numel = largest_received(program, r.stage, layout.element_bytes);
  return b;
}

Span weight_span(const ShardBuffers& b, const StepLayout& layout, const StepPlan& plan, int grad,
                 const std::vector<int64_t>& unit_base) {
  const auto g = static_cast<size_t>(grad);
  const int64_t numel = plan.grads.at(g).numel;
  if (!b.fsdp) return {Buffer::weights, layout.grads.at(g).flat_offset, numel};
  const auto u = static_cast<size_t>(b.unit_of_grad.at(g));
  return {Buffer::gathered, unit_base.at(u) + b.offset_in_unit[g], numel};
}

Span grad_span(const ShardBuffers& b, const StepLayout& layout, const StepPlan& plan, int grad) {
  const auto g = static_cast<size_t>(grad);
  const int64_t numel = plan.grads.at(g).numel;
  if (!b.fsdp) {
    const auto bucket = static_cast<size_t>(plan.grads.at(g).bucket);
    return {Buffer::grads, b.bucket_base.at(bucket) + layout.grads.at(g).bucket_offset, numel};
  }
  const UnitShard& unit = b.units.at(static_cast<size_t>(b.unit_of_grad.at(g)));
  return {Buffer::unit_grads, unit.grad_offset + b.offset_in_unit[g], numel};
}

std::string describe_buffers(const ShardBuffers& b, int element_bytes) {
  std::string out = fmt::format("# buffers of rank {} of {}{} ({}):", b.rank, b.shards,
                                b.stage >= 0 ? fmt::format(" of pipeline stage {}", b.stage) : std::string(),
                                b.fsdp                   ? "FSDP shards"
                                : b.grad_shard_numel > 0 ? "flat weights, DeepSpeed's bucket buffers and partition"
                                                         : "flat weights and gradients");
  const std::pair<Buffer, int64_t> held[] = {
      {Buffer::weights, b.weights_numel},           {Buffer::grads, b.grads_numel},
      {Buffer::weight_shard, b.weight_shard_numel}, {Buffer::grad_shard, b.grad_shard_numel},
      {Buffer::gathered, b.gathered_numel},         {Buffer::unit_grads, b.unit_grads_numel},
      {Buffer::tensor_comm, b.tensor_comm_numel},   {Buffer::p2p_recv, b.p2p_recv_numel}};
  for (const auto& [buffer, numel] : held)
    if (numel > 0)
      out += fmt::format(" {} {} ({})", to_string(buffer), numel,
                         format_bytes(static_cast<double>(numel) * element_bytes));
  return out + fmt::format("; {} in all; the optimizer updates {} elements of {}\n",
                           format_bytes(static_cast<double>(b.numel_held()) * element_bytes), b.optimizer.numel,
                           to_string(b.optimizer.buffer));
}

}  // namespace dpsim::backend
