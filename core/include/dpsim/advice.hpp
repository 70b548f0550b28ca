#pragma once
// "What limits this step": short sentences computed from a result. Suggestions that change the
// scenario (a larger micro-batch, bigger buckets, a faster fabric) are re-evaluated with `evaluate`
// (estimate or simulate), so every gain quoted is computed, never canned. `evaluate` gets the variant and its plan
// (make_step_plan), which the advice has often built already to see whether the variant fits.
#include <functional>
#include <string>
#include <vector>

#include "dpsim/plan.hpp"
#include "dpsim/result.hpp"
#include "dpsim/scenario.hpp"

namespace dpsim {

using Evaluate = std::function<StepResult(const Scenario&, const StepPlan&)>;

// Exposed communication above this share of the step makes a step communication-bound: the one threshold of
// the advice, stated in docs/guide.md (tests/core/test_advice.cpp checks the two agree). A product decision, not a
// hardware fact, so a named constant rather than data/*.yaml: it matches the usual 90% scaling-efficiency target
// (a step that loses more than a tenth of its time waiting on the network is below it from communication alone).
inline constexpr double kCommBoundShare = 0.10;
// An alternative whose throughput gain is below this share is not worth a line of advice.
inline constexpr double kWorthMentioningGain = 0.02;

// What estimate's lower step figure is: DDP's perfect-overlap bound (every all-reduce hidden behind the synced
// backward), or for a sharded step the program's own order with a clock per stream (gathers the compute waits for,
// no contention, no slowdown of compute beside collectives).
const char* lower_bound_label(const StepResult& result);

std::vector<std::string> advise(const Scenario& scenario, const StepResult& result, const Evaluate& evaluate);

}  // namespace dpsim
