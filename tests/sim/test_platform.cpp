// Platform and trace basics: routes follow the topology; simulate() can be called repeatedly; a bad
// request becomes an exception in the caller.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>

#include "dpsim/error.hpp"
#include "dpsim/sim/simulate.hpp"
#include "dpsim/sim/trace.hpp"
#include "dpsim/units.hpp"
#include "sim_fixtures.hpp"

using namespace dpsim;
using namespace dpsim::test;

TEST_CASE("simulate() runs many times in one process and is deterministic", "[sim]") {
  const Scenario s = scenario_on(nvswitch_node(8));
  const StepPlan plan = one_bucket_plan(8, 1 << 26);
  SimOptions o;
  o.progress = false;
  const StepResult a = simulate(s, plan, o);
  const StepResult b = simulate(s, plan, o);
  CHECK(to_json(a).dump() == to_json(b).dump());
  CHECK(a.step_time_s > 0);
  CHECK(!a.timeline.empty());
}

TEST_CASE("overlap hides communication; --no-overlap exposes it", "[sim]") {
  const Scenario s = scenario_on(nvswitch_node(8));
  StepPlan plan = one_bucket_plan(8, 1 << 28);
  SimOptions o;
  o.progress = false;
  const StepResult with = simulate(s, plan, o);
  o.overlap = false;
  const StepResult without = simulate(s, plan, o);
  CHECK(without.buckets[0].start_s >= without.forward_s + without.backward_s - 1e-12);
  CHECK(without.step_time_s >= with.step_time_s);
}

TEST_CASE("step fidelity has no GPU cap: a 512-GPU run under the event budget runs, one above it is refused", "[sim]") {
  const Scenario s = scenario_on(ib_cluster(64), Algorithm::automatic, Protocol::automatic);  // 512 GPUs
  const StepPlan plan = one_bucket_plan(512, 1 << 24);
  SimOptions o;
  o.progress = false;
  o.fidelity = Fidelity::step;
  SimStats st;
  CHECK_NOTHROW(simulate(s, plan, o, &st));
  CHECK(st.estimated_events <= o.max_events);
  CHECK(st.events > 512);  // the call's steps, every GPU and NIC a host
  o.max_events = st.estimated_events - 1;
  CHECK_THROWS_WITH(simulate(s, plan, o), Catch::Contains("step fidelity would simulate about") &&
                                              Catch::Contains("512 GPUs") && Catch::Contains("--max-events"));
}

TEST_CASE("a run above the event limit is refused up front with the estimate", "[sim]") {
  const Scenario s = scenario_on(ib_cluster(16));  // 128 GPUs, ring: 254 steps of 128 + 128 flows
  const StepPlan plan = one_bucket_plan(128, 1 << 20);
  SimOptions o;
  o.progress = false;
  o.fidelity = Fidelity::step;
  o.max_events = 1000;
  CHECK_THROWS_WITH(simulate(s, plan, o), Catch::Contains("would simulate about") && Catch::Contains("--max-events"));
  o.max_events = 1e8;
  SimStats st;
  CHECK_NOTHROW(simulate(s, plan, o, &st));
  CHECK(st.estimated_events >= 254.0 * 256);
}

TEST_CASE("a topology error in the child process surfaces as InputError", "[sim]") {
  Topology t = ib_cluster(2);
  t.network.kind = NetworkKind::none;
  SimOptions o;
  o.progress = false;
  CHECK_THROWS_AS(simulate(scenario_on(t), one_bucket_plan(16, 1 << 20), o), InputError);
}

TEST_CASE("Chrome trace: one process per node, compute and comm tracks per GPU", "[sim]") {
  const Scenario s = scenario_on(ib_cluster(4));
  SimOptions o;
  o.progress = false;
  const StepResult r = simulate(s, one_bucket_plan(32, 1 << 24), o);
  const auto trace = nlohmann::json::parse(chrome_trace_json(r, 8));
  std::set<int> pids;
  int complete = 0;
  for (const auto& e : trace["traceEvents"]) {
    pids.insert(e["pid"].get<int>());
    if (e["ph"] == "X") ++complete;
  }
  CHECK(pids.size() == 4);  // ranks 0, 31 and evenly spaced ones over the 4 nodes
  CHECK(complete == 8 * static_cast<int>(r.timeline.size()));
  CHECK(trace_sample(32, 8).front() == 0);
  CHECK(trace_sample(32, 8).back() == 31);
  CHECK(trace_sample(4, 8).size() == 4);
}

TEST_CASE("the trace says which GPUs it holds, and names each bucket as the bucket table does", "[sim]") {
  const Scenario s = scenario_on(ib_cluster(2));
  SimOptions o;
  o.progress = false;
  const StepResult r = simulate(s, one_bucket_plan(16, 184600000), o);
  const auto trace = nlohmann::json::parse(chrome_trace_json(r, 4));
  CHECK(trace["otherData"]["traced_gpus"] == nlohmann::json::array({0, 5, 10, 15}));
  CHECK(trace["otherData"]["world_size"] == 16);
  CHECK(trace["otherData"]["traced_gpus_note"] ==
        "GPUs 0, 5, 10, 15 of 16 (the first, the last and evenly spaced ones between: every GPU runs the same "
        "simulated timeline)");
  CHECK(trace_sample_note(4, 8) == "all 4 GPUs");
  bool named = false;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "comm")
      named = named || e["name"].get<std::string>().find(" 184.60 MB ") != std::string::npos;
  }
  CHECK(named);
  CHECK(format_bytes(static_cast<double>(r.buckets.at(0).bytes)) == "184.60 MB");
}
