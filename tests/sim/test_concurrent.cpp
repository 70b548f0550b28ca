// Concurrent collectives share links as SimGrid's max-min sharing says: several groups of one kind running the
// same call at once (the data groups beside tensor parallelism), and several comm streams. The fast fidelity's
// shortcut (each call's flow pattern timed once, alone) is used only for one comm stream, where calls never overlap.
#include <catch2/catch.hpp>
#include <cmath>
#include <iostream>

#include "dpsim/analytic.hpp"
#include "dpsim/program.hpp"
#include "dpsim/sim/simulate.hpp"
#include "sim_fixtures.hpp"

using namespace dpsim;
using namespace dpsim::test;

namespace {

constexpr long long kBytes = 1LL << 30;

// Two nodes of two NVSwitch GPUs; `shared`: one NIC serves both GPUs, else one NIC each. 50 GB/s per NIC.
Scenario two_by_two(bool shared) {
  Topology t = nvswitch_node(2);
  t.name = shared ? "test-shared-nic" : "test-nic-per-gpu";
  t.nodes = 2;
  if (shared) {
    t.nics.push_back(Nic{{0, 1}, link(50)});
  } else {
    t.nics.push_back(Nic{{0}, link(50)});
    t.nics.push_back(Nic{{1}, link(50)});
  }
  t.network.kind = NetworkKind::single_switch;
  t.network.link_latency_s = 0.5e-6;
  return scenario_on(t);
}

SimOptions quiet(const StepProgram* program) {
  SimOptions o;
  o.progress = false;
  o.overlap = false;
  o.program = program;
  return o;
}

// The bandwidth part of a call as simulated: its duration less NCCL's latency and pipeline fill.
double bandwidth_s(const Scenario& s, const StepProgram& program, const CommTiming& c) {
  const CommCall& call = program.classes.front().comms.at(static_cast<size_t>(c.index));
  const CollectiveCost cost = call_cost(s, call, group_fabric(s, program, call.group));
  return c.end_s - c.start_s - cost.latency_s - cost.fill_s;
}

// The DDP program of one bucket with a second all-reduce of the same bucket on a second comm stream, issued at
// the same point (both wait for the bucket's gradients).
StepProgram two_streams(const StepPlan& plan) {
  StepProgram p = make_step_program(plan, {});
  RankProgram& r = p.classes.front();
  p.streams.push_back("comm 2");
  const int stream = static_cast<int>(p.streams.size()) - 1;
  CommCall second = r.comms.front();
  second.index = 1;
  second.bucket = -1;
  r.comms.push_back(second);
  for (size_t i = 0; i < r.instrs.size(); ++i) {
    if (r.instrs[i].type != Instr::Type::collective) continue;
    Instr wait{};
    wait.type = Instr::Type::wait;
    wait.stream = stream;
    wait.event = second.inputs_ready;
    Instr call{};
    call.type = Instr::Type::collective;
    call.stream = stream;
    call.comm = 1;
    r.instrs.insert(r.instrs.begin() + static_cast<std::ptrdiff_t>(i) + 1, {wait, call});
    break;
  }
  return p;
}

}  // namespace

TEST_CASE("two data groups sharing one NIC each get half of it; with a NIC each, all of it", "[sim]") {
  // data 2 x tensor 2 on 2 nodes x 2 GPUs: data groups {0, 2} and {1, 3}, one GPU per node each, both crossing
  // the network at once.
  const StepPlan plan = one_bucket_plan(4, kBytes);
  StepProgram program = make_step_program(plan, {});
  program.dims = ParallelDims{2, 2, 1};
  double per_group_bytes_per_s[2] = {0, 0};
  for (bool shared : {true, false}) {
    const Scenario s = two_by_two(shared);
    const StepResult r = simulate(s, plan, quiet(&program));
    REQUIRE(r.comm.size() == 1);
    // Each rank of a 2-rank all-reduce sends 2(n-1)/n x S = S over its node's NIC.
    per_group_bytes_per_s[shared ? 0 : 1] = static_cast<double>(kBytes) / bandwidth_s(s, program, r.comm[0]);
  }
  const double nic = 50e9 * two_by_two(true).nccl.ring_efficiency_for("net", two_by_two(true).topology.gpu.arch);
  std::cout << "data groups, shared NIC: " << per_group_bytes_per_s[0] / 1e9
            << " GB/s each; a NIC each: " << per_group_bytes_per_s[1] / 1e9 << " GB/s each (NIC " << nic / 1e9
            << " GB/s)\n";
  CHECK(per_group_bytes_per_s[0] == Approx(nic / 2).epsilon(1e-6));
  CHECK(per_group_bytes_per_s[1] == Approx(nic).epsilon(1e-6));
}

TEST_CASE("two comm streams: two calls at once share the links, each twice as long as one alone", "[sim]") {
  const Scenario s = scenario_on(nvswitch_node(4));
  const StepPlan plan = one_bucket_plan(4, kBytes);
  const StepProgram one = make_step_program(plan, {});
  const StepResult alone = simulate(s, plan, quiet(&one));
  const double t1 = bandwidth_s(s, one, alone.comm.at(0));
  const StepProgram two = two_streams(plan);
  const StepResult both = simulate(s, plan, quiet(&two));
  REQUIRE(both.comm.size() == 2);
  std::cout << "one all-reduce alone: " << t1 * 1e3
            << " ms of bandwidth; two at once on two streams: " << bandwidth_s(s, two, both.comm[0]) * 1e3 << " and "
            << bandwidth_s(s, two, both.comm[1]) * 1e3 << " ms\n";
  for (const CommTiming& c : both.comm) {
    CHECK(c.start_s == Approx(alone.comm[0].start_s).epsilon(1e-9));
    CHECK(bandwidth_s(s, two, c) == Approx(2 * t1).epsilon(1e-6));  // half the links' bandwidth each
  }
  CHECK(both.comm[0].stream != both.comm[1].stream);
}
