// FSDP's step (zero2 = SHARD_GRAD_OP, zero3 = FULL_SHARD), as PyTorch's FullyShardedDataParallel issues it
// (torch/distributed/fsdp/_runtime_utils.py; ../shared/reference/parallelism-model.md). All collectives of the
// data group run on its one NCCL stream in issue order (ProcessGroupNCCL: one stream per device per group), so the
// order below is the schedule: the host issues ahead of the GPU, the compute waits for each unit's gather, and a
// reduce-scatter waits for its unit's gradients.
//
// Forward: the root's gather first (FSDP's root keeps its parameters to the end of the backward), then each unit's
// in order; with limit_all_gathers (zero3) the gather of block j waits until block j-2 has resharded.
// Backward (zero3): the last block's gather (after its forward has resharded it), the next block's prefetched
// before the current block's reduce-scatter (backward_pre and backward_post both issue it before that
// reduce-scatter, from the pre- and the post-backward hook; with a host ahead of the GPU they give the same order),
// or after it (none). zero2 keeps
// the parameters from the forward and gathers nothing in backward, as zero3 does with reshard_after_forward false.
// The root's reduce-scatter is last.
//
// HSDP (hybrid_shard): the gathers and reduce-scatters run over the shard group, and each reduce-scatter is followed
// by an all-reduce of the unit's gradient shard over the replica group on FSDP's _all_reduce_stream, which waits
// for the post-backward stream (torch/distributed/fsdp/_runtime_utils.py `_reduce_grad`, the
// `if uses_hybrid_sharded_strategy:` branch: `_all_reduce_stream.wait_stream(_post_backward_stream)`, then
// `dist.all_reduce(new_sharded_grad, group=state._inter_node_pg)`; `_init_streams` makes it its own stream when a
// unit uses hybrid sharding; ROCm/pytorch mirror of upstream at 3539e1d; pytorch/pytorch PR #106080 made it async).
// The replica group's NCCL stream is not the shard group's, so these all-reduces overlap the next units'
// reduce-scatters and gathers.
#include <map>

#include "program_builder.hpp"

namespace dpsim::program_detail {

namespace {

constexpr int kAllReduce = StepProgram::kAllReduce;

struct FsdpBuilder {
  const StepPlan& plan;
  Builder& bld;
  int micro = 0;
  bool sync = false;
  std::vector<int> unit_of{};  // per op

  int units() const { return static_cast<int>(plan.sharded.units.size()); }
  bool is_root(int u) const { return plan.sharded.units[static_cast<size_t>(u)].name.empty(); }
  int key(int u) const { return micro * units() + u; }
  bool zero3() const { return plan.sharded.sharding == Sharding::zero3; }
  bool hybrid() const { return plan.sharded.replicas > 1; }
  // The group a unit's gathers and reduce-scatters run over: the data group, or HSDP's shard group.
  GroupKind group() const { return hybrid() ? GroupKind::shard : GroupKind::data; }

  int gather(int u, EventRef after) {
    const ShardUnit& unit = plan.sharded.units[static_cast<size_t>(u)];
    const int index = bld.call(kComm, {.kind = CollectiveKind::all_gather,
                                       .group = group(),
                                       .bytes = unit.gather_bytes,
                                       .unit = u,
                                       .inputs_ready = after});
    bld.record(kComm, {EventKind::gathered, index});
    return index;
  }

  void reduce(int u) {
    const ShardUnit& unit = plan.sharded.units[static_cast<size_t>(u)];
    if (unit.reduce_bytes <= 0) return;  // no tensor of the unit trains (core/trainable.cpp): no gradient to reduce
    const EventRef ready{EventKind::unit_backward, key(u)};
    bld.wait(kComm, ready);
    bld.call(kComm, {.kind = CollectiveKind::reduce_scatter,
                     .group = group(),
                     .bytes = unit.reduce_bytes,
                     .unit = u,
                     .inputs_ready = ready});
    bld.record(kComm, {EventKind::reduced, u});
    if (!hybrid()) return;
    const EventRef scattered{EventKind::reduced, u};
    bld.wait(kAllReduce, scattered);
    bld.call(kAllReduce, {.kind = CollectiveKind::all_reduce,
                          .group = GroupKind::replica,
                          .bytes = plan.sharded.shard_bytes(unit),
                          .unit = u,
                          .inputs_ready = scattered});
    bld.record(kAllReduce, {EventKind::all_reduced, u});
  }

  // Forward: each unit's gather issued at its pre-forward, or (forward_prefetch) the next unit's issued there too,
  // before the unit computes (_pre_forward_unshard: `_prefetch_handle(..., _PrefetchMode.FORWARD)` after the unit's
  // own unshard). With the host ahead of the GPU both give the same GPU schedule: the comm stream runs the gathers
  // back to back unless the limiter holds one back, and each unit's ops wait for its gather. They differ under
  // limit_all_gathers: the host waits for the oldest free event before each gather, and a prefetched gather meets
  // that wait one block earlier, so one more block is gathered at once (Sharded::limiter_lag).
  void forward(bool gather_root, bool gather_blocks) {
    std::vector<int> order;  // units in forward order of first use
    std::vector<int> last_op(static_cast<size_t>(units()), -1);
    for (size_t o = 0; o < plan.ops.size(); ++o) {
      const int u = unit_of[o];
      if (last_op[static_cast<size_t>(u)] < 0) order.push_back(u);
      last_op[static_cast<size_t>(u)] = static_cast<int>(o);
    }
    std::map<int, int> gathered;  // unit -> its gather's index
    std::vector<int> blocks;      // non-root units gathered so far, in order
    auto issue = [&](size_t i) {
      if (i >= order.size()) return;
      const int u = order[i];
      if (is_root(u) ? !gather_root : !gather_blocks) return;
      EventRef after{EventKind::unit_forward, -1};
      if (!is_root(u)) {
        const auto lag = static_cast<size_t>(plan.sharded.limiter_lag());
        if (plan.sharded.reshard_after_forward && plan.sharded.limit_all_gathers && blocks.size() >= lag) {
          after = {EventKind::unit_forward, key(blocks[blocks.size() - lag])};
          bld.wait(kComm, after);
        }
        blocks.push_back(u);
      }
      gathered[u] = gather(u, after);
    };
    bld.mark(kCompute, Mark::forward_begin, micro);
    size_t next = 0;
    if (plan.sharded.forward_prefetch) issue(next++);
    std::vector<bool> started(static_cast<size_t>(units()), false);
    for (size_t o = 0; o < plan.ops.size(); ++o) {
      const int u = unit_of[o];
      if (!started[static_cast<size_t>(u)]) {
        started[static_cast<size_t>(u)] = true;
        issue(next++);  // this unit's gather (forward_prefetch: the next unit's, before this unit computes)
        if (gathered.count(u)) bld.wait(kCompute, {EventKind::gathered, gathered[u]});
      }
      compute_op(bld, plan,
                 {.type = Instr::Type::forward, .stream = kCompute, .op = static_cast<int>(o), .micro = micro});
      if (last_op[static_cast<size_t>(u)] == static_cast<int>(o) && !is_root(u))
        bld.record(kCompute, {EventKind::unit_forward, key(u)});
    }
    bld.mark(kCompute, Mark::forward_end, micro);
  }

  // Backward: units in order of first use by the backward; zero3 gathers each block again (prefetched as the
  // knobs say), every unit's gradients are reduce-scattered once its backward is done (synced micro-step only).
  void backward() {
    std::vector<int> order;
    std::vector<int> last_pos(static_cast<size_t>(units()), -1);
    for (size_t pos = 0; pos < plan.backward_order.size(); ++pos) {
      const int u = unit_of[static_cast<size_t>(backward_op(plan, pos))];
      if (last_pos[static_cast<size_t>(u)] < 0) order.push_back(u);
      last_pos[static_cast<size_t>(u)] = static_cast<int>(pos);
    }
    const bool regather = plan.sharded.reshard_after_forward;
    const bool prefetch = plan.sharded.backward_prefetch != BackwardPrefetch::none;
    std::map<int, int> gathered;
    size_t next_gather = 0;
    auto issue_gather = [&](size_t limit) {  // gathers for order[next_gather .. limit)
      for (; next_gather < std::min(limit, order.size()); ++next_gather) {
        const int u = order[next_gather];
        if (is_root(u)) continue;
        // Gathered again after its forward resharded it (the last block's forward ends just before).
        const EventRef resharded{EventKind::unit_forward, key(u)};
        bld.wait(kComm, resharded);
        gathered[u] = gather(u, resharded);
      }
    };
    std::vector<bool> started(static_cast<size_t>(units()), false);
    size_t i = 0;
    for (size_t pos = 0; pos < plan.backward_order.size(); ++pos) {
      const int o = backward_op(plan, pos);
      const int u = unit_of[static_cast<size_t>(o)];
      if (!started[static_cast<size_t>(u)]) {
        started[static_cast<size_t>(u)] = true;
        if (regather) {
          issue_gather(i + (prefetch ? 2 : 1));
          if (gathered.count(u)) bld.wait(kCompute, {EventKind::gathered, gathered[u]});
        }
        ++i;
      }
      compute_op(bld, plan, {.type = Instr::Type::backward, .stream = kCompute, .op = o, .micro = micro, .sync = sync});
      if (last_pos[static_cast<size_t>(u)] == static_cast<int>(pos)) {
        bld.record(kCompute, {EventKind::unit_backward, key(u)});
        if (sync) reduce(u);
      }
    }
    bld.mark(kCompute, Mark::backward_end, micro);
  }
};

}  // namespace

StepProgram fsdp_program(const StepPlan& plan, const ProgramOptions& options) {
  StepProgram program;
  program.streams = {"compute", "comm"};
  program.dims = program_dims(plan);
  if (plan.sharded.replicas > 1) program.streams.push_back("all_reduce");
  program.micro_steps = micro_steps(plan, options);
  if (plan.sharded.units.empty()) throw RuntimeError("plan: FSDP with no units (a model without parameters)");
  Builder bld;
  bld.rank.rank_class = "every rank";
  bld.rank.ranks = plan.world_size;
  FsdpBuilder f{plan, bld};
  f.unit_of.assign(plan.ops.size(), -1);
  for (size_t u = 0; u < plan.sharded.units.size(); ++u)
    for (int o : plan.sharded.units[u].ops) f.unit_of[static_cast<size_t>(o)] = static_cast<int>(u);
  for (int u : f.unit_of)
    if (u < 0) throw RuntimeError("plan: an op belongs to no FSDP unit");
  bld.mark(kCompute, Mark::step_begin, 0);
  int last_reduce_unit = -1;
  for (int micro = 0; micro < program.micro_steps; ++micro) {
    f.micro = micro;
    // FSDP's no_sync() on the first k-1 micro-steps, unless the trainer reduces every micro-step (fsdp.no_sync false)
    f.sync = !plan.sharded.no_sync || micro == program.micro_steps - 1;
    // The root's parameters stay gathered across the micro-steps; zero2 keeps every unit's under no_sync() too
    // (_runtime_utils.py _should_free_in_backward), zero3 frees them after each use (with reshard_after_forward
    // false, after each micro-step's backward: FSDP2's reshard_after_backward default).
    // Without no_sync() every backward reshards (_should_free_in_backward: `state._sync_gradients or ...`), so each
    // micro-step gathers everything again.
    const bool regather = micro == 0 || !plan.sharded.no_sync;
    f.forward(regather, f.zero3() || regather);
    f.backward();
  }
  for (const CommCall& c : bld.rank.comms)
    if (c.kind == CollectiveKind::reduce_scatter) last_reduce_unit = c.unit;
  // The post-backward final callback waits for the last reduction (_post_backward_final_callback: the current
  // stream waits for the post-backward stream and, with HSDP, for _all_reduce_stream, which runs them in order).
  if (last_reduce_unit >= 0)
    bld.wait(kCompute, {f.hybrid() ? EventKind::all_reduced : EventKind::reduced, last_reduce_unit});
  bld.mark(kCompute, Mark::optimizer_begin, 0);
  bld.push({.type = Instr::Type::optimizer, .stream = kCompute});
  bld.mark(kCompute, Mark::optimizer_end, 0);
  program.classes.push_back(std::move(bld.rank));
  return program;
}

}  // namespace dpsim::program_detail
