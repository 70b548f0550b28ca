#include "dpsim/analytic.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "dpsim/error.hpp"

namespace dpsim {

FabricSummary group_fabric(const Scenario& s, const StepProgram& program, GroupKind kind) {
  ProcessGroup g = group_of(0, kind, program.dims);
  // A pipeline group's calls are sends between neighbouring stages: the fabric of a pair of them. A context group's
  // are sends between ring neighbours, whose slowest pair crosses nodes where the group spans several.
  if (kind == GroupKind::pipeline && g.ranks.size() > 2) g.ranks.resize(2);
  if (kind == GroupKind::context && g.ranks.size() > 2) {
    const int gpn = s.topology.gpus_per_node;
    size_t k = 0;
    while (k + 1 < g.ranks.size() && g.ranks[k] / gpn == g.ranks[k + 1] / gpn) ++k;
    if (k + 1 == g.ranks.size()) k = 0;  // one node: any neighbours
    g.ranks = {g.ranks[k], g.ranks[k + 1]};
  }
  const GroupPlacement p = placement(g, program.dims, s.topology.gpus_per_node);
  return summarize_fabric(group_topology(s.topology, p));
}

std::map<GroupKind, FabricSummary> call_fabrics(const Scenario& s, const StepProgram& program,
                                                const RankProgram& rank) {
  std::map<GroupKind, FabricSummary> out;
  for (const CommCall& c : rank.comms)
    if (!out.count(c.group)) out.emplace(c.group, group_fabric(s, program, c.group));
  return out;
}

CollectiveCost call_cost(const Scenario& s, const CommCall& call, const FabricSummary& fabric) {
  // A send of S bytes to the neighbouring stage moves what each rank of a two-rank ring all-gather of 2S moves (S, one
  // step, over the pair's fabric): NCCL runs its point-to-point over the same channels and protocols.
  if (call.kind == CollectiveKind::send)
    return collective_cost(CollectiveKind::all_gather, 2 * call.bytes, fabric, s.nccl, s.collective);
  return collective_cost(call.kind, call.bytes, fabric, s.nccl, s.collective);
}

CallCosts::CallCosts(const Scenario& s, const StepProgram& program, const RankProgram& rank) : scenario_(&s) {
  for (const auto& [kind, fabric] : call_fabrics(s, program, rank))
    groups_.emplace(kind, Group{fabric, group_size(kind, program.dims) > 1});
}

const CallCosts::Group& CallCosts::group(const CommCall& call) const {
  const auto it = groups_.find(call.group);
  if (it == groups_.end())
    throw RuntimeError(
        fmt::format("{} over the {} group: not a call of this program", to_string(call.kind), to_string(call.group)));
  return it->second;
}

bool CallCosts::moves(const CommCall& call) const { return group(call).moves; }

CollectiveCost CallCosts::cost(const CommCall& call) {
  const FabricSummary& fabric = group(call).fabric;
  if (std::isnan(call.bytes)) return call_cost(*scenario_, call, fabric);  // no key orders a NaN
  const std::tuple<CollectiveKind, GroupKind, double> key{call.kind, call.group, call.bytes};
  const auto it = costs_.find(key);
  if (it != costs_.end()) return it->second;
  return costs_.emplace(key, call_cost(*scenario_, call, fabric)).first->second;
}

CommTiming comm_timing(const CommCall& call, const std::string& stream, double ready_s, double start_s, double end_s,
                       const CollectiveCost* cost) {
  return {to_string(call.kind),
          to_string(call.group),
          call.index,
          call.bytes,
          stream,
          ready_s,
          start_s,
          end_s,
          cost ? to_string(cost->algorithm) : "none",
          cost ? to_string(cost->protocol) : "none"};
}

namespace {
const RankProgram kNoClass{};  // an executor of no class of the program: it can run no call
}  // namespace

AnalyticExecutor::AnalyticExecutor(const Scenario& s, const StepPlan& plan, const StepProgram& program,
                                   size_t rank_class, EventTimes* crossed, bool keep_calls)
    : s_(s),
      plan_(plan),
      cm_(compute_model(s)),
      op_s_(op_seconds(plan.ops, cm_)),
      costs_(s, program, rank_class < program.classes.size() ? program.classes[rank_class] : kNoClass),
      stage_(rank_class < program.classes.size() ? program.classes[rank_class].stage : -1),
      crossed_(crossed),
      keep_calls_(keep_calls) {
  clock_.assign(program.streams.size(), 0.0);
  if (keep_calls_ && rank_class < program.classes.size()) calls_.reserve(program.classes[rank_class].comms.size());
}

EventTimes& AnalyticExecutor::events_of(EventKind kind) {
  if (!crosses_classes(kind)) return event_s_;
  if (!crossed_)
    throw RuntimeError(
        fmt::format("{}: a cross-class event, and no class shares this executor's events", to_string(kind)));
  return *crossed_;
}

void AnalyticExecutor::advance(const Instr& in, double seconds) {
  clock_[static_cast<size_t>(in.stream)] += seconds;
  phase_busy_[static_cast<size_t>(in.phase())] += seconds;
}

// An op's time, and at its forward its executed FLOPs (forward, recomputation and backward) or the bytes it moves
// (forward and backward), into its kind's share of the compute.
void AnalyticExecutor::attribute(const PlanOp& op, double seconds, bool forward) {
  switch (op.kind) {
    case OpKind::matmul:
    case OpKind::attention: {
      const bool gemm = op.kind == OpKind::matmul;
      (gemm ? by_kind_.gemm_s : by_kind_.attention_s) += seconds;
      if (forward) (gemm ? by_kind_.gemm_flops : by_kind_.attention_flops) += executed_flops(op, cm_);
      break;
    }
    case OpKind::elementwise:
    case OpKind::embedding:
      by_kind_.memory_bound_s += seconds;
      if (forward)
        by_kind_.memory_bound_bytes += op.forward_bytes * (op.recompute_forward ? 2 : 1) +
                                       (op.input_grad || op.weight_grad ? op.backward_bytes : 0.0);
      break;
  }
}

void AnalyticExecutor::forward(const Instr& in) {
  const double t = op_s_.forward.at(static_cast<size_t>(in.op));
  advance(in, t);
  attribute(plan_.ops.at(static_cast<size_t>(in.op)), t, true);
}

void AnalyticExecutor::backward(const Instr& in) {
  const double t = op_s_.backward.at(static_cast<size_t>(in.op));
  advance(in, t);
  attribute(plan_.ops.at(static_cast<size_t>(in.op)), t, false);
  if (in.sync) synced_backward_ += t;
}

void AnalyticExecutor::collective(const Instr& in, const CommCall& call) {
  CallTiming t;
  t.stream = in.stream;
  t.moves = costs_.moves(call);  // a group of one rank moves nothing
  if (t.moves) t.cost = costs_.cost(call);
  const double* ready = event_s_.find(call.inputs_ready);
  double& clock = clock_[static_cast<size_t>(in.stream)];
  t.ready_s = call.inputs_ready.kind == EventKind::none ? clock : ready ? *ready : 0.0;
  t.start_s = clock;
  const double seconds =
      !t.moves ? 0.0
      : call.tp_overlap != TpOverlap::none
          ? blocking_call_s(call, t.cost.time_s, op_s_, s_.parallelism.tensor, s_.topology.gpu.sm_count, s_.nccl)
          : t.cost.time_s + s_.nccl.framework_launch_overhead_s;
  clock += seconds;
  t.end_s = clock;
  if (in.stream != StepProgram::kCompute)
    comm_busy_ += seconds;
  else
    (between_stages(call) ? p2p_ : blocking_comm_) += seconds;
  if (in.stream == StepProgram::kCompute && call.group == GroupKind::context) context_comm_ += seconds;
  if (keep_calls_) calls_.push_back(t);
}

void AnalyticExecutor::record(const Instr& in) {
  events_of(in.event.kind)[in.event] = clock_[static_cast<size_t>(in.stream)];
}

void AnalyticExecutor::wait(const Instr& in) {
  const double t = events_of(in.event.kind).at(in.event);
  double& clock = clock_[static_cast<size_t>(in.stream)];
  if (in.stream == StepProgram::kCompute && t > clock)
    (crosses_classes(in.event.kind) ? bubble_ : waited_comm_) += t - clock;
  clock = std::max(clock, t);
}

void AnalyticExecutor::unflatten(const Instr& in) {
  const double t = memory_seconds(final_copy_bytes_of(plan_, stage_), cm_);
  advance(in, t);
  by_kind_.optimizer_s += t;
}

void AnalyticExecutor::optimizer(const Instr& in) {
  const double t = optimizer_seconds(optimizer_of(plan_, stage_), cm_);
  advance(in, t);
  by_kind_.optimizer_s += t;
}

void AnalyticExecutor::mark(const Instr&) {}

double AnalyticExecutor::step_s() const { return *std::max_element(clock_.begin(), clock_.end()); }

}  // namespace dpsim
