// The buffer plan the CUDA executor allocates and addresses by (backend/src/shard_buffers.cpp), checked without a
// GPU: what a sharded rank holds equals core's memory figures, every collective reads and writes inside its
// buffers, FSDP's gathers land where the unit's compute reads, and the dry run lists the same buffers.
#include <fmt/format.h>
#include <algorithm>
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <set>
#include <string>

#include "../source_dir.hpp"
#include "dpsim/backend/executor.hpp"
#include "dpsim/backend/shard_buffers.hpp"
#include "dpsim/load.hpp"
#include "dpsim/sharding.hpp"
#include "dpsim/sweep_spec.hpp"
#include "tiny_plan.hpp"

using namespace dpsim;
using namespace dpsim::backend;

namespace {

Scenario scenario(const std::string& file, std::vector<Override> more = {}) {
  return load_scenario(std::filesystem::path(DPSIM_SOURCE_DIR) / "scenarios" / file, more);
}

struct Planned {
  StepPlan plan;
  StepProgram program;
  StepLayout layout;
  ShardBuffers buffers;
};

Planned planned(const Scenario& s, int rank) {
  Planned p{make_step_plan(s), {}, {}, {}};
  p.program = make_step_program(p.plan);
  p.layout = make_layout(p.plan, dtype_bytes(s.training.param_dtype), s.ddp.gradient_as_bucket_view);
  p.buffers = plan_shard_buffers(p.plan, p.program, p.layout, rank);
  return p;
}

int64_t size_of(const ShardBuffers& b, Buffer buffer) {
  switch (buffer) {
    case Buffer::weights: return b.weights_numel;
    case Buffer::grads: return b.grads_numel;
    case Buffer::weight_shard: return b.weight_shard_numel;
    case Buffer::grad_shard: return b.grad_shard_numel;
    case Buffer::gathered: return b.gathered_numel;
    case Buffer::unit_grads: return b.unit_grads_numel;
    case Buffer::tensor_comm: return b.tensor_comm_numel;
    case Buffer::p2p_recv: return b.p2p_recv_numel;
    case Buffer::none: break;
  }
  return 0;
}

void check_inside(const ShardBuffers& b, const Span& s) {
  CHECK(s.buffer != Buffer::none);
  CHECK(s.offset >= 0);
  CHECK(s.numel > 0);
  CHECK(s.offset + s.numel <= size_of(b, s.buffer));
}

// Bytes the CUDA executor allocates for the model state: every buffer plus the optimizer's fp32 state of what it
// updates (core/sharding.cpp's table).
double held_bytes(const Planned& p, const Scenario& s) {
  const ModelStateParts parts =
      model_state_parts(s.training.param_dtype, s.training.grad_dtype, s.training.optimizer, true);
  return static_cast<double>(p.buffers.numel_held()) * p.layout.element_bytes +
         static_cast<double>(p.buffers.optimizer.numel) * parts.optimizer;
}

}  // namespace

TEST_CASE("zero3: a rank holds its shards, the root and two gathered blocks, and one unit's gradients") {
  const Scenario s = scenario("llama3.1-8b-fsdp-8xh100.yaml");
  for (int rank : {0, 5}) {
    const Planned p = planned(s, rank);
    const ShardBuffers& b = p.buffers;
    REQUIRE(b.fsdp);
    CHECK(b.shards == 8);
    // ZeRO's (2 + 2 + K) Ψ / N and core's units in flight, up to FlatParameter's padding (< N elements a unit).
    const double expected = p.plan.memory.model_state_bytes + p.plan.memory.unsharded_bytes;
    CHECK(std::abs(held_bytes(p, s) - expected) / expected < 1e-6);
    CHECK(held_bytes(p, s) >= expected);
    // Shards: disjoint, in unit order, covering the shard buffers.
    int64_t next = 0;
    for (const UnitShard& u : b.units) {
      CHECK(u.shard_offset == next);
      CHECK(u.shard * b.shards >= u.numel);
      CHECK(u.shard * b.shards - u.numel < b.shards);
      next += u.shard;
    }
    CHECK(next == b.weight_shard_numel);
    CHECK(b.grad_shard_numel == b.weight_shard_numel);

    std::vector<int64_t> base(b.units.size(), -1);
    std::set<int64_t> block_slots;
    const RankProgram& r = p.program.classes.front();
    for (size_t i = 0; i < r.comms.size(); ++i) {
      const CommCall& c = r.comms[i];
      const CallBuffers& cb = b.call(c);
      check_inside(b, cb.send);
      check_inside(b, cb.recv);
      const UnitShard& u = b.units.at(static_cast<size_t>(c.unit));
      CHECK(cb.count == u.shard);
      if (c.kind == CollectiveKind::all_gather) {  // the rank's shard into the unit's gathered buffer
        CHECK(cb.send == Span{Buffer::weight_shard, u.shard_offset, u.shard});
        CHECK(cb.recv.buffer == Buffer::gathered);
        CHECK(cb.recv.numel == u.shard * b.shards);
        CHECK(b.gathered_at[i] == cb.recv.offset);
        if (c.unit > 0) block_slots.insert(cb.recv.offset);
        base[static_cast<size_t>(c.unit)] = cb.recv.offset;
      } else {  // the unit's unsharded gradients into the rank's gradient shard
        REQUIRE(c.kind == CollectiveKind::reduce_scatter);
        CHECK(cb.send == Span{Buffer::unit_grads, 0, u.shard * b.shards});
        CHECK(cb.recv == Span{Buffer::grad_shard, u.shard_offset, u.shard});
      }
    }
    CHECK(block_slots.size() == 2);  // limit_all_gathers: the blocks take two slots in turn
    // Each gradient's weights are read inside its unit's gathered buffer, its gradient written in the unit buffer.
    for (size_t g = 0; g < p.plan.grads.size(); ++g) {
      const auto u = static_cast<size_t>(b.unit_of_grad[g]);
      const Span w = weight_span(b, p.layout, p.plan, static_cast<int>(g), base);
      check_inside(b, w);
      CHECK(w.offset >= base[u]);
      CHECK(w.offset + w.numel <= base[u] + b.units[u].shard * b.shards);
      const Span gs = grad_span(b, p.layout, p.plan, static_cast<int>(g));
      check_inside(b, gs);
      CHECK(gs.offset + gs.numel <= b.units[u].numel);
    }
    CHECK(b.optimizer == Span{Buffer::weight_shard, 0, b.weight_shard_numel});
    CHECK(b.optimizer_grads == Span{Buffer::grad_shard, 0, b.grad_shard_numel});
  }
}

TEST_CASE("zero3 without limit_all_gathers gathers every block into a slot of its own") {
  const Planned p = planned(scenario("llama3.1-8b-fsdp-8xh100.yaml", {{"fsdp.limit_all_gathers", "false"}}), 0);
  std::set<int64_t> slots;
  for (size_t i = 0; i < p.buffers.gathered_at.size(); ++i)
    if (p.buffers.gathered_at[i] >= 0 && p.program.classes.front().comms[i].unit > 0)
      slots.insert(p.buffers.gathered_at[i]);
  CHECK(slots.size() == p.buffers.units.size() - 1);  // 32 blocks
}

TEST_CASE("FSDP zero2 keeps every unit gathered beside its shard; DDP-bucket zero1 reduces into its slices") {
  const Scenario z2 = scenario("llama3.1-8b-fsdp-8xh100.yaml", {{"parallelism.sharding", "shard_grad_op"}});
  const Planned p = planned(z2, 2);
  CHECK(p.buffers.gathered_numel >= p.plan.parameters);  // the unsharded weights of every unit at once
  CHECK(p.buffers.gathered_numel - p.plan.parameters < static_cast<int64_t>(p.buffers.units.size()) * 8);
  // FSDP holds the flat parameter's shard as well as its unsharded copy: the ZeRO formula's 2 Ψ plus 2 Ψ / N.
  const double formula = p.plan.memory.model_state_bytes;
  const double extra = static_cast<double>(p.buffers.weight_shard_numel + p.buffers.unit_grads_numel) * 2;
  CHECK(std::abs(held_bytes(p, z2) - (formula + extra)) / formula < 1e-6);

  const Scenario z1 = scenario("llama3.1-8b-8xh100.yaml", {{"parallelism.sharding", "zero1"}});
  const int rank = 3;
  const Planned q = planned(z1, rank);
  REQUIRE_FALSE(q.buffers.fsdp);
  int gathers = 0;
  for (const CommCall& c : q.program.classes.front().comms) {
    const CallBuffers& cb = q.buffers.call(c);
    check_inside(q.buffers, cb.send);
    check_inside(q.buffers, cb.recv);
    if (c.kind == CollectiveKind::reduce_scatter) {
      const auto bk = static_cast<size_t>(c.bucket);
      CHECK(cb.recv.offset == q.layout.bucket_offset[bk] + rank * (q.layout.bucket_numel[bk] / 8));
    } else {  // in place: the rank's part of bucket k's weights is its slice
      REQUIRE(c.kind == CollectiveKind::all_gather);
      const auto bk = static_cast<size_t>(gathers++);
      CHECK(cb.recv.offset == q.layout.bucket_offset[bk]);
      CHECK(cb.send.offset == cb.recv.offset + rank * cb.count);
    }
  }
  CHECK(gathers == static_cast<int>(q.plan.buckets.size()));
  CHECK(q.buffers.optimizer.offset == rank * q.buffers.optimizer.numel);
}

TEST_CASE("DeepSpeed: the update on the rank's slice, gathered in place by one all-gather") {
  const int rank = 6;
  const Planned p = planned(scenario("llama3.1-8b-deepspeed-zero2-8xh100.yaml"), rank);
  const CommCall& last = p.program.classes.front().comms.back();
  REQUIRE(last.kind == CollectiveKind::all_gather);
  const CallBuffers& cb = p.buffers.call(last);
  CHECK(cb.send == p.buffers.optimizer);
  CHECK(cb.send.offset == rank * cb.count);
  CHECK(cb.recv == Span{Buffer::weights, 0, 8 * cb.count});
  check_inside(p.buffers, cb.recv);
  CHECK(8 * cb.count >= p.plan.parameters);
}

TEST_CASE("the dry run lists each collective's buffers from the plan; a world of one launches none") {
  const Scenario s = scenario("llama3.1-8b-fsdp-8xh100.yaml");
  const Planned p = planned(s, 0);
  DryRunExecutor dry(&p.buffers);
  walk_step(p.plan, p.layout, {}, dry);
  int listed = 0;
  for (const Launch& l : dry.launches()) {
    if (l.type != Launch::Type::collective) continue;
    REQUIRE(l.buffers);
    const CallBuffers& cb = p.buffers.call(l.call);
    CHECK(l.buffers->recv_offset == cb.recv.offset);
    CHECK(l.buffers->count == cb.count);
    const bool names_gathered =
        l.describe(p.plan).find(fmt::format("-> gathered+{}", cb.recv.offset)) != std::string::npos;
    CHECK(names_gathered == (l.call.kind == CollectiveKind::all_gather));
    ++listed;
  }
  CHECK(listed == static_cast<int>(p.program.classes.front().comms.size()));

  // One GPU: each "shard" is the whole unit; the walker issues no collective on a group of one.
  const Scenario one = scenario("llama3.1-8b-fsdp-8xh100.yaml", {{"cluster.gpus_per_node", "1"}});
  const Planned q = planned(one, 0);
  CHECK(q.buffers.shards == 1);
  CHECK(q.buffers.weight_shard_numel == q.plan.parameters);
  DryRunExecutor single(&q.buffers);
  walk_step(q.plan, q.layout, {}, single);
  for (const Launch& l : single.launches()) CHECK(l.type != Launch::Type::collective);
}

TEST_CASE("DeepSpeed stage 2: the gradients only in its bucket buffers and the rank's partition") {
  for (const char* overlap : {"false", "true"}) {
    INFO("overlap_comm " << overlap);
    const Scenario s =
        scenario("llama3.1-8b-deepspeed-zero2-8xh100.yaml", {{"zero_optimization.overlap_comm", overlap}});
    const Planned p = planned(s, 1);
    const ShardBuffers& b = p.buffers;
    const int64_t buffers = std::string(overlap) == "true" ? 2 : 1;
    int64_t largest = 0;
    for (int64_t numel : p.layout.bucket_numel) largest = std::max(largest, numel);
    CHECK(b.grads_numel == buffers * largest);
    CHECK(b.grad_shard_numel == b.optimizer.numel);
    CHECK(b.optimizer_grads == Span{Buffer::grad_shard, 0, b.optimizer.numel});
    // Weights, the partition's gradients and optimizer state: ZeRO-2's 2 Ψ + (2 + K) Ψ / N, up to the padding.
    const ModelStateParts parts =
        model_state_parts(s.training.param_dtype, s.training.grad_dtype, s.training.optimizer, true);
    const double state = static_cast<double>(b.weights_numel + b.grad_shard_numel) * 2 +
                         static_cast<double>(b.optimizer.numel) * parts.optimizer;
    CHECK(std::abs(state - p.plan.memory.model_state_bytes) / p.plan.memory.model_state_bytes < 1e-6);
    // Bucket k in buffer k % buffers; every gradient written inside its bucket's buffer.
    for (size_t k = 0; k < p.plan.buckets.size(); ++k)
      CHECK(b.bucket_base[k] == static_cast<int64_t>(k) % buffers * largest);
    for (size_t g = 0; g < p.plan.grads.size(); ++g) {
      const Span gs = grad_span(b, p.layout, p.plan, static_cast<int>(g));
      check_inside(b, gs);
      const auto k = static_cast<size_t>(p.plan.grads[g].bucket);
      CHECK(gs.offset >= b.bucket_base[k]);
      CHECK(gs.offset + gs.numel <= b.bucket_base[k] + p.layout.bucket_numel[k]);
    }
    for (const CommCall& c : p.program.classes.front().comms)
      if (c.kind == CollectiveKind::all_reduce) {
        const CallBuffers& cb = b.call(c);
        CHECK(cb.send == cb.recv);  // in place in its bucket buffer
        CHECK(cb.send.offset == b.bucket_base.at(static_cast<size_t>(c.bucket)));
      }
  }
}

TEST_CASE("the tiny zero3 plan of the GPU test: units laid out in op order, the root's lin2 apart from the block") {
  StepPlan plan = test::tiny_plan(64);
  plan.world_size = 1;
  plan.dims.data = 1;
  plan.sharded.sharding = Sharding::zero3;
  plan.sharded.shards = 1;
  plan.buckets.clear();  // as make_step_plan makes a zero3 plan (the GPU test times every bucket's events)
  plan.sharded.units = {ShardUnit{.name = "", .ops = {0, 4}, .parameters = 58},
                        ShardUnit{.name = "block.0", .ops = {1, 2, 3}, .parameters = 30}};
  const StepLayout layout = make_layout(plan, 2, true);
  const StepProgram program = make_step_program(plan);
  const ShardBuffers b = plan_shard_buffers(plan, program, layout, 0);
  // Root: embed.weight [0, 40), lin2.weight [40, 58); block: lin1.weight [0, 24), norm.weight [24, 30).
  CHECK(b.offset_in_unit == std::vector<int64_t>{40, 24, 0, 0});
  CHECK(b.unit_of_grad == std::vector<int>{0, 1, 1, 0});
  CHECK(b.unit_grads_numel == 58);
  CHECK(b.gathered_numel == 58 + 30);  // the root's region and one block slot (one block)
  DryRunExecutor dry(&b);
  walk_step(plan, layout, {}, dry);
  for (const Launch& l : dry.launches()) CHECK(l.type != Launch::Type::collective);  // one rank
  // The step's timing marks are all recorded: the executor reads each (an unrecorded CUDA event fails the step).
  for (Mark m : {Mark::step_begin, Mark::forward_begin, Mark::forward_end, Mark::backward_end, Mark::optimizer_begin,
                 Mark::optimizer_end}) {
    CHECK(std::any_of(dry.launches().begin(), dry.launches().end(),
                      [m](const Launch& l) { return l.type == Launch::Type::mark && l.mark_kind == m; }));
  }
}

TEST_CASE("FSDP under pipeline stages: a stage holds its own units, each gathered and its gradients kept apart") {
  // torchtitan's FSDP2 with pipelining (program_pipeline.cpp): every unit of the stage gathered once at the step's
  // start and kept, its gradients accumulated over the micro-batches until its one reduce-scatter.
  const Scenario s = scenario("llama3.1-70b-fsdp-tp8-pp2-64xh100.yaml");
  const StepPlan plan = make_step_plan(s);
  const StepProgram program = make_step_program(plan);
  REQUIRE(plan.pipeline.stages == 2);
  int64_t stages_numel = 0;
  for (int stage : {0, 1}) {
    INFO("stage " << stage);
    const StepLayout layout = make_layout(plan, dtype_bytes(s.training.param_dtype), true, stage);
    const ShardBuffers b = plan_shard_buffers(plan, program, layout, 3, 0, stage);
    REQUIRE(b.fsdp);
    CHECK(b.stage == stage);
    // Model state as core counts it for the stage: the sharded state, plus its weights and gradients in full.
    const MemoryNeed& need = plan.pipeline.stage.at(static_cast<size_t>(stage)).memory;
    const Planned p{plan, program, layout, b};
    const double expected = need.model_state_bytes + need.unsharded_bytes;
    const double activations = static_cast<double>((b.tensor_comm_numel + b.p2p_recv_numel) * layout.element_bytes);
    CHECK(std::abs(held_bytes(p, s) - activations - expected) / expected < 1e-6);
    CHECK(held_bytes(p, s) - activations >= expected);

    int64_t shards = 0, held = 0;
    for (size_t u = 0; u < b.units.size(); ++u) {
      CHECK(b.units[u].held == (plan.sharded.units[u].stage == stage));
      if (!b.units[u].held) CHECK(b.units[u].shard == 0);
      shards += b.units[u].shard;
      held += b.units[u].held ? b.units[u].numel : 0;
    }
    CHECK(shards == b.weight_shard_numel);
    CHECK(held == layout.total_numel);
    stages_numel += held;

    // One gather and one reduce-scatter per unit of the stage, each into a region of its own.
    std::set<int64_t> gathered, reduced;
    std::vector<int64_t> base(b.units.size(), -1);
    const RankProgram& r = program.classes.at(static_cast<size_t>(stage));
    for (size_t i = 0; i < r.comms.size(); ++i) {
      const CommCall& c = r.comms[i];
      if (c.group != GroupKind::data) continue;
      const CallBuffers& cb = b.call(c);
      check_inside(b, cb.send);
      check_inside(b, cb.recv);
      const UnitShard& u = b.units.at(static_cast<size_t>(c.unit));
      REQUIRE(u.held);
      if (c.kind == CollectiveKind::all_gather) {
        CHECK(gathered.insert(cb.recv.offset).second);
        base[static_cast<size_t>(c.unit)] = cb.recv.offset;
      } else {
        REQUIRE(c.kind == CollectiveKind::reduce_scatter);
        CHECK(cb.send == Span{Buffer::unit_grads, u.grad_offset, u.shard * b.shards});
        CHECK(reduced.insert(u.grad_offset).second);
      }
    }
    const auto units =
        static_cast<size_t>(std::count_if(b.units.begin(), b.units.end(), [](const UnitShard& u) { return u.held; }));
    CHECK(gathered.size() == units);
    CHECK(reduced.size() == units);
    // Each of the stage's gradients: its weights inside its unit's gathered region, its gradient in its unit's.
    for (size_t g = 0; g < plan.grads.size(); ++g) {
      if (!layout.grads[g].held) continue;
      const auto u = static_cast<size_t>(b.unit_of_grad[g]);
      REQUIRE(b.units[u].held);
      const Span w = weight_span(b, layout, plan, static_cast<int>(g), base);
      check_inside(b, w);
      CHECK(w.offset + w.numel <= base[u] + b.units[u].shard * b.shards);
      const Span gs = grad_span(b, layout, plan, static_cast<int>(g));
      check_inside(b, gs);
      CHECK(gs.offset >= b.units[u].grad_offset);
      CHECK(gs.offset + gs.numel <= b.units[u].grad_offset + b.units[u].shard * b.shards);
    }
  }
  // The two stages' units are the whole model's (on one GPU of its tensor group).
  CHECK(stages_numel == make_layout(plan, dtype_bytes(s.training.param_dtype), true).total_numel);
}
