// The dry run of every shipped scenario launches the step plan (make_step_plan): the same ops in forward order,
// backward in plan.backward_order, the same buckets launched in plan order right after the op that completes
// them. tests/sim/test_executors.cpp checks that the simulator and the estimate run the same program.
#include <catch2/catch.hpp>

#include <filesystem>

#include "../shipped_scenarios.hpp"
#include "dpsim/backend/executor.hpp"
#include "dpsim/load.hpp"
#include "dpsim/scenario.hpp"
#include "sequence_check.hpp"

using namespace dpsim;
using namespace dpsim::backend;

TEST_CASE("dry-run sequence follows the step plan (ops, backward order, buckets) for every shipped scenario") {
  int checked = 0;
  for (const auto& path : test::shipped_scenarios()) {
    INFO("scenario " << path.filename().string());
    const Scenario s = load_scenario(path);
    const StepPlan plan = make_step_plan(s);
    if (plan.sharded.sharding != Sharding::none) continue;  // its program: tests/sim/test_executors.cpp
    if (plan.dims.tensor > 1) continue;                     // the tensor group's calls: test_executors.cpp too
    if (plan.dims.data == 1) continue;  // no bucket all-reduce on a group of one: test_walker.cpp's one-rank case
    const StepLayout layout = make_layout(plan, dtype_bytes(s.training.param_dtype), s.ddp.gradient_as_bucket_view);
    DryRunExecutor dry;
    WalkOptions wo;
    wo.gradient_accumulation = plan.gradient_accumulation;
    walk_step(plan, layout, wo, dry);
    const auto facts = test::check_sequence(plan, layout, dry.launches());

    // Forward: every op's GEMMs, in plan order, with the plan's shapes.
    std::vector<std::pair<int, int>> fwd;
    for (const auto& l : dry.launches())
      if ((l.type == Launch::Type::gemm || l.type == Launch::Type::batched_gemm) &&
          l.gemm_call.role == GemmRole::forward)
        fwd.emplace_back(l.gemm_call.op, l.gemm_call.gemm);
    std::vector<std::pair<int, int>> expected;
    for (size_t o = 0; o < plan.ops.size(); ++o)
      for (size_t j = 0; j < plan.ops[o].gemms.size(); ++j)
        expected.emplace_back(static_cast<int>(o), static_cast<int>(j));
    const auto per_step = static_cast<size_t>(std::max<int64_t>(1, plan.gradient_accumulation));
    REQUIRE(fwd.size() == expected.size() * per_step);
    CHECK(std::equal(expected.begin(), expected.end(), fwd.end() - static_cast<long>(expected.size())));

    // Backward: plan.backward_order (ops that launch anything: a frozen op outside the autograd graph, neither dX nor
    // dW wanted, launches nothing; core/trainable.cpp).
    std::vector<int> backward;
    for (int o : plan.backward_order) {
      const PlanOp& op = plan.ops[static_cast<size_t>(o)];
      const bool gemms = !op.gemms.empty() && (op.input_grad || op.weight_grad);
      if (gemms || !op.grads.empty() || op.backward_bytes > 0) backward.push_back(o);
    }
    CHECK(facts.backward_ops == backward);

    // Buckets: plan order, each right after the op that completes it.
    REQUIRE(facts.ready_after_op.size() == plan.buckets.size());
    for (size_t b = 0; b < plan.buckets.size(); ++b) {
      CHECK(facts.allreduce_order[b] == static_cast<int>(b));
      CHECK(facts.ready_after_op[b] ==
            plan.backward_order[static_cast<size_t>(plan.buckets[b].ready_after_backward_op)]);
    }
    ++checked;
  }
  CHECK(checked >= 5);
}
