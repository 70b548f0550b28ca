// The step program: DDP as one instance (buckets as all-reduces over the data group on one comm stream, in order),
// the walker's checks, and the closed-form executor against the formulas it replaces.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "../source_dir.hpp"
#include "dpsim/analytic.hpp"
#include "dpsim/cost.hpp"
#include "dpsim/load.hpp"
#include "dpsim/program.hpp"

using namespace dpsim;

namespace {
std::string src(const std::string& rel) { return std::string(DPSIM_SOURCE_DIR) + "/" + rel; }

std::vector<const Instr*> on_stream(const RankProgram& r, int stream, Instr::Type type) {
  std::vector<const Instr*> out;
  for (const Instr& i : r.instrs)
    if (i.stream == stream && i.type == type) out.push_back(&i);
  return out;
}
}  // namespace

TEST_CASE("DDP program: every bucket is an all-reduce over the data group, launched in order on the comm stream") {
  const Scenario s = load_scenario(src("scenarios/gpt2-124m-4xrtx4090.yaml"));
  const StepPlan plan = make_step_plan(s);
  const StepProgram p = make_step_program(plan);
  REQUIRE(p.streams == std::vector<std::string>{"compute", "comm"});
  REQUIRE(p.classes.size() == 1);
  CHECK(p.dims.world() == plan.world_size);
  const RankProgram& r = p.classes.front();
  REQUIRE(r.comms.size() == plan.buckets.size());
  const auto calls = on_stream(r, StepProgram::kComm, Instr::Type::collective);
  REQUIRE(calls.size() == plan.buckets.size());
  for (size_t b = 0; b < calls.size(); ++b) {
    const CommCall& c = r.comms[static_cast<size_t>(calls[b]->comm)];
    CHECK(c.kind == CollectiveKind::all_reduce);
    CHECK(c.group == GroupKind::data);
    CHECK(c.bucket == static_cast<int>(b));
    CHECK(c.bytes == static_cast<double>(plan.buckets[b].bytes));
  }
  // Each bucket's ready event is recorded right after the backward op that completes it.
  for (size_t i = 0; i < r.instrs.size(); ++i) {
    const Instr& in = r.instrs[i];
    if (in.type != Instr::Type::record || in.event.kind != EventKind::bucket_ready) continue;
    size_t j = i;
    while (r.instrs[j].type != Instr::Type::backward) --j;
    const auto& bucket = plan.buckets[static_cast<size_t>(in.event.index)];
    CHECK(r.instrs[j].op == plan.backward_order[static_cast<size_t>(bucket.ready_after_backward_op)]);
  }
  // The optimizer comes after the wait for the last bucket.
  const auto waits = on_stream(r, StepProgram::kCompute, Instr::Type::wait);
  REQUIRE(waits.size() == 1);
  CHECK(waits[0]->event == EventRef{EventKind::bucket_done, static_cast<int>(plan.buckets.size()) - 1});
  CHECK(on_stream(r, StepProgram::kCompute, Instr::Type::optimizer).size() == 1);
}

TEST_CASE("gradient accumulation: k forwards and backwards, communication only on the last micro-step") {
  const Scenario s = load_scenario(src("scenarios/llama3.1-8b-8xh100.yaml"));
  const StepPlan plan = make_step_plan(s);
  const StepProgram p = make_step_program(plan, {.micro_steps = 3});
  const RankProgram& r = p.classes.front();
  CHECK(p.micro_steps == 3);
  CHECK(on_stream(r, 0, Instr::Type::forward).size() == 3 * plan.ops.size());
  const auto bwd = on_stream(r, 0, Instr::Type::backward);
  CHECK(bwd.size() == 3 * plan.backward_order.size());
  CHECK(std::count_if(bwd.begin(), bwd.end(), [](const Instr* i) { return i->sync; }) ==
        static_cast<long>(plan.backward_order.size()));
  CHECK(on_stream(r, 1, Instr::Type::collective).size() == plan.buckets.size());
  for (const Instr* c : on_stream(r, 0, Instr::Type::record)) CHECK(c->event.kind == EventKind::bucket_ready);
}

TEST_CASE("no overlap: the comm stream waits for the whole backward") {
  const Scenario s = load_scenario(src("scenarios/llama3.1-8b-8xh100.yaml"));
  const StepPlan plan = make_step_plan(s);
  const StepProgram p = make_step_program(plan, {.overlap = false});
  const RankProgram& r = p.classes.front();
  const auto it = std::find_if(r.instrs.begin(), r.instrs.end(), [](const Instr& i) {
    return i.type == Instr::Type::wait && i.event.kind == EventKind::backward_done;
  });
  REQUIRE(it != r.instrs.end());
  CHECK(it->stream == StepProgram::kComm);
  const auto first_call =
      std::find_if(r.instrs.begin(), r.instrs.end(), [](const Instr& i) { return i.type == Instr::Type::collective; });
  CHECK(it < first_call);
}

TEST_CASE("a plan whose buckets complete out of order, or never, has no program") {
  const Scenario s = load_scenario(src("scenarios/gpt2-124m-4xrtx4090.yaml"));
  StepPlan plan = make_step_plan(s);
  REQUIRE(plan.buckets.size() >= 2);
  StepPlan swapped = plan;
  std::swap(swapped.buckets[0].ready_after_backward_op, swapped.buckets[1].ready_after_backward_op);
  CHECK_THROWS_WITH(make_step_program(swapped), Catch::Contains("strictly in order"));
  plan.buckets.back().ready_after_backward_op = static_cast<int>(plan.backward_order.size());
  CHECK_THROWS_WITH(make_step_program(plan), Catch::Contains("1 bucket(s) never complete"));
}

namespace {
struct Nothing final : StepExecutor {
  int calls = 0;
  void forward(const Instr&) override { ++calls; }
  void backward(const Instr&) override { ++calls; }
  void collective(const Instr&, const CommCall&) override { ++calls; }
  void record(const Instr&) override { ++calls; }
  void wait(const Instr&) override { ++calls; }
  void unflatten(const Instr&) override { ++calls; }
  void optimizer(const Instr&) override { ++calls; }
  void mark(const Instr&) override { ++calls; }
};
}  // namespace

TEST_CASE("the walker refuses a program no executor could run") {
  const Scenario s = load_scenario(src("scenarios/gpt2-124m-4xrtx4090.yaml"));
  const StepPlan plan = make_step_plan(s);
  StepProgram p = make_step_program(plan);
  Nothing ex;
  walk_program(p, p.classes.front(), ex);
  CHECK(ex.calls == static_cast<int>(p.classes.front().instrs.size()));
  RankProgram bad = p.classes.front();
  const Instr wait{.type = Instr::Type::wait, .stream = 1, .event = {EventKind::bucket_done, 99}};
  bad.instrs.insert(bad.instrs.begin(), wait);
  CHECK_THROWS_WITH(walk_program(p, bad, ex), Catch::Contains("before it is recorded"));
  RankProgram off = p.classes.front();
  off.instrs.front().stream = 7;
  CHECK_THROWS_WITH(walk_program(p, off, ex), Catch::Contains("does not exist"));
}

TEST_CASE("closed-form executor: phase sums and stream clocks from the cost formulas") {
  const Scenario s = load_scenario(src("scenarios/llama3.1-8b-8xh100.yaml"));
  const StepPlan plan = make_step_plan(s);
  const StepProgram p = make_step_program(plan);
  AnalyticExecutor ex(s, plan, p);
  walk_program(p, p.classes.front(), ex);
  const ComputeModel cm = compute_model(s);
  double fwd = 0, bwd = 0;
  for (const PlanOp& op : plan.ops) {
    fwd += forward_seconds(op, cm);
    bwd += backward_seconds(op, cm);
  }
  CHECK(ex.phase_busy_s(Phase::forward) == Approx(fwd).epsilon(1e-12));
  CHECK(ex.phase_busy_s(Phase::backward) == Approx(bwd).epsilon(1e-12));
  CHECK(ex.synced_backward_s() == Approx(bwd).epsilon(1e-12));
  CHECK(ex.phase_busy_s(Phase::optimizer) ==
        Approx(optimizer_seconds(plan.optimizer, cm) + memory_seconds(plan.final_copy_bytes, cm)).epsilon(1e-12));
  const FabricSummary f = summarize_fabric(s.topology);
  double comm = 0;
  for (const Bucket& b : plan.buckets)
    comm += allreduce_cost(static_cast<double>(b.bytes), f, s.nccl, s.collective).time_s +
            s.nccl.framework_launch_overhead_s;
  CHECK(ex.comm_busy_s() == Approx(comm).epsilon(1e-12));
  // Stream clocks: each all-reduce starts when its bucket is ready and the previous one is done, and the step
  // ends after the optimizer, which waits for the last.
  REQUIRE(ex.calls().size() == plan.buckets.size());
  for (size_t i = 0; i < ex.calls().size(); ++i) {
    const CallTiming& c = ex.calls()[i];
    CHECK(c.start_s >= c.ready_s);
    if (i > 0) CHECK(c.start_s == Approx(std::max(c.ready_s, ex.calls()[i - 1].end_s)));
  }
  CHECK(ex.step_s() == Approx(std::max(fwd + bwd, ex.calls().back().end_s) + ex.phase_busy_s(Phase::optimizer)));
}

TEST_CASE("events are found by kind and index: the same index of two kinds, and negative ones, stay apart") {
  EventMap<double> at;
  at[{EventKind::bucket_ready, 3}] = 1.5;
  at[{EventKind::bucket_done, 3}] = 2.5;
  at[{EventKind::bucket_ready, -3}] = 3.5;
  CHECK(at.at({EventKind::bucket_ready, 3}) == 1.5);
  CHECK(at.at({EventKind::bucket_done, 3}) == 2.5);
  CHECK(*at.find({EventKind::bucket_ready, -3}) == 3.5);
  CHECK(at.find({EventKind::bucket_done, -3}) == nullptr);
  CHECK_FALSE(at.contains({EventKind::gradient_sent, 3}));
  CHECK_THROWS_AS(at.at({EventKind::activation_sent, 3}), std::out_of_range);
}
