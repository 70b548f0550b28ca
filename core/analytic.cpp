#include "dpsim/analytic.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "dpsim/error.hpp"

namespace dpsim {

FabricSummary group_fabric(const Scenario& s, const StepProgram& program, GroupKind kind) {
  const ProcessGroup g = group_of(0, kind, program.dims);
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
  return collective_cost(call.kind, call.bytes, fabric, s.nccl, s.collective);
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

AnalyticExecutor::AnalyticExecutor(const Scenario& s, const StepPlan& plan, const StepProgram& program)
    : s_(s),
      plan_(plan),
      dims_(program.dims),
      cm_(compute_model(s)),
      fabric_(program.classes.empty() ? std::map<GroupKind, FabricSummary>{}
                                      : call_fabrics(s, program, program.classes.front())) {
  clock_.assign(program.streams.size(), 0.0);
}

void AnalyticExecutor::advance(const Instr& in, double seconds) {
  clock_[static_cast<size_t>(in.stream)] += seconds;
  phase_busy_[static_cast<size_t>(in.phase())] += seconds;
}

void AnalyticExecutor::forward(const Instr& in) {
  advance(in, forward_seconds(plan_.ops[static_cast<size_t>(in.op)], cm_));
}

void AnalyticExecutor::backward(const Instr& in) {
  const double t = backward_seconds(plan_.ops[static_cast<size_t>(in.op)], cm_);
  advance(in, t);
  if (in.sync) synced_backward_ += t;
}

void AnalyticExecutor::collective(const Instr& in, const CommCall& call) {
  const auto it = fabric_.find(call.group);
  if (it == fabric_.end())
    throw RuntimeError(
        fmt::format("{} over the {} group: not a call of this program", to_string(call.kind), to_string(call.group)));
  CallTiming t;
  t.stream = in.stream;
  t.moves = group_of(0, call.group, dims_).ranks.size() > 1;  // a group of one rank moves nothing
  if (t.moves) t.cost = call_cost(s_, call, it->second);
  const auto ready = event_s_.find({static_cast<int>(call.inputs_ready.kind), call.inputs_ready.index});
  double& clock = clock_[static_cast<size_t>(in.stream)];
  t.ready_s = call.inputs_ready.kind == EventKind::none ? clock : ready == event_s_.end() ? 0.0 : ready->second;
  t.start_s = clock;
  const double seconds = t.moves ? t.cost.time_s + s_.nccl.framework_launch_overhead_s : 0.0;
  clock += seconds;
  t.end_s = clock;
  (in.stream == StepProgram::kCompute ? blocking_comm_ : comm_busy_) += seconds;
  calls_.push_back(t);
}

void AnalyticExecutor::record(const Instr& in) {
  event_s_[{static_cast<int>(in.event.kind), in.event.index}] = clock_[static_cast<size_t>(in.stream)];
}

void AnalyticExecutor::wait(const Instr& in) {
  const double t = event_s_.at({static_cast<int>(in.event.kind), in.event.index});
  double& clock = clock_[static_cast<size_t>(in.stream)];
  clock = std::max(clock, t);
}

void AnalyticExecutor::unflatten(const Instr& in) { advance(in, memory_seconds(plan_.final_copy_bytes, cm_)); }

void AnalyticExecutor::optimizer(const Instr& in) { advance(in, optimizer_seconds(plan_.optimizer, cm_)); }

void AnalyticExecutor::mark(const Instr&) {}

double AnalyticExecutor::step_s() const { return *std::max_element(clock_.begin(), clock_.end()); }

}  // namespace dpsim
