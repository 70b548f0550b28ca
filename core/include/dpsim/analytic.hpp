#pragma once
// The closed-form executor of a step program: a clock per stream, no contention. A compute instruction advances
// its stream's clock by the op's modelled time, a collective by NCCL's cost model over its group's fabric plus
// the framework's launch of it; a wait moves the waiting stream's clock to the event's time.
#include <array>
#include <map>
#include <tuple>
#include <vector>

#include "dpsim/compute_cost.hpp"
#include "dpsim/cost.hpp"
#include "dpsim/program.hpp"
#include "dpsim/result.hpp"
#include "dpsim/scenario.hpp"

namespace dpsim {

// The fabric a group's traffic crosses: the topology as the group sees it (its nodes, its GPUs per node, the
// NICs serving them).
FabricSummary group_fabric(const Scenario& scenario, const StepProgram& program, GroupKind group);
// The fabric of every group that `rank`'s calls use, each summarized once.
std::map<GroupKind, FabricSummary> call_fabrics(const Scenario& scenario, const StepProgram& program,
                                                const RankProgram& rank);

// NCCL's cost of one call of the program over `fabric`.
CollectiveCost call_cost(const Scenario& scenario, const CommCall& call, const FabricSummary& fabric);

// The calls of one rank class, costed: each group's fabric summarized once (call_fabrics), each distinct (kind,
// group, bytes) costed once (call_cost). A pipeline stage issues the same few calls for each of its micro-batches.
class CallCosts {
 public:
  CallCosts(const Scenario& scenario, const StepProgram& program, const RankProgram& rank);
  // Whether the call's group has more than one rank (a group of one moves nothing). Throws RuntimeError for a call
  // over a group that none of the rank's calls use.
  bool moves(const CommCall& call) const;
  CollectiveCost cost(const CommCall& call);  // call_cost over the call's group's fabric

 private:
  struct Group {
    FabricSummary fabric;
    bool moves = false;
  };
  const Group& group(const CommCall& call) const;
  const Scenario* scenario_;
  std::map<GroupKind, Group> groups_;
  std::map<std::tuple<CollectiveKind, GroupKind, double>, CollectiveCost> costs_;
};

struct CallTiming {
  int stream = 0;
  double ready_s = 0;  // when its input was complete (CommCall::inputs_ready)
  double start_s = 0;
  double end_s = 0;
  CollectiveCost cost;
  bool moves = true;  // its group has more than one rank (else nothing is sent and it takes no time)
};

// A call's entry in the result's comm[]; `cost` null when nothing moves (one GPU): algorithm and protocol "none".
CommTiming comm_timing(const CommCall& call, const std::string& stream, double ready_s, double start_s, double end_s,
                       const CollectiveCost* cost);

// When each event was recorded, on its stream's clock.
using EventTimes = EventMap<double>;

class AnalyticExecutor final : public StepExecutor {
 public:
  // Runs rank class `rank_class` of `program`; `crossed` holds the times of the events that cross classes (pipeline
  // sends), shared by the executors of every class that walk_classes runs together. Without `keep_calls`, calls()
  // stays empty (a pipeline's result lists one stage's calls, and the others hold hundreds of thousands).
  AnalyticExecutor(const Scenario& scenario, const StepPlan& plan, const StepProgram& program, size_t rank_class = 0,
                   EventTimes* crossed = nullptr, bool keep_calls = true);
  void forward(const Instr& instr) override;
  void backward(const Instr& instr) override;
  void collective(const Instr& instr, const CommCall& call) override;
  void record(const Instr& instr) override;
  void wait(const Instr& instr) override;
  void unflatten(const Instr& instr) override;
  void optimizer(const Instr& instr) override;
  void mark(const Instr& instr) override;

  double step_s() const;  // the latest stream clock
  double phase_busy_s(Phase phase) const { return phase_busy_[static_cast<size_t>(phase)]; }
  double comm_busy_s() const { return comm_busy_; }  // the collectives on comm streams, launch included
  // The collectives on the compute stream (tensor parallelism's, and what context parallelism's ring exchanges leave
  // exposed), which the compute waits for; context_comm_s: the ring's part.
  double blocking_comm_s() const { return blocking_comm_; }
  double context_comm_s() const { return context_comm_; }
  double p2p_s() const { return p2p_; }                          // pipeline sends, on the compute stream
  double bubble_s() const { return bubble_; }                    // the compute stream waiting for another stage
  double waited_comm_s() const { return waited_comm_; }          // the compute stream waiting for its own collectives
  double synced_backward_s() const { return synced_backward_; }  // the backward that can hide communication
  const std::vector<CallTiming>& calls() const { return calls_; }
  const ComputeByKind& by_kind() const { return by_kind_; }  // the compute stream's time by op kind

 private:
  void advance(const Instr& instr, double seconds);
  void attribute(const PlanOp& op, double seconds, bool forward);
  EventTimes& events_of(EventKind kind);
  const Scenario& s_;
  const StepPlan& plan_;
  ComputeModel cm_;
  OpSeconds op_s_;
  CallCosts costs_;  // of the executor's rank class
  std::vector<double> clock_;
  EventTimes event_s_;
  std::array<double, 3> phase_busy_{};
  int stage_ = -1;
  EventTimes* crossed_ = nullptr;
  double comm_busy_ = 0, blocking_comm_ = 0, context_comm_ = 0, synced_backward_ = 0, p2p_ = 0, bubble_ = 0,
         waited_comm_ = 0;
  bool keep_calls_ = true;
  std::vector<CallTiming> calls_;
  ComputeByKind by_kind_;
};

}  // namespace dpsim
