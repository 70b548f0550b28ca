// The fast fidelity (bucket-granularity flows on the symmetry-reduced platform) agrees with the step
// fidelity (every NCCL ring step as messages on the full platform) within 0.5% on every shipped
// scenario with at most 64 GPUs.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "../source_dir.hpp"
#include "dpsim/load.hpp"
#include "dpsim/sim/simulate.hpp"
#include "sim_fixtures.hpp"

using namespace dpsim;

namespace {

void compare(const std::filesystem::path& file) {
  const Scenario s = load_scenario(file);
  if (s.world_size() > 64) return;
  const StepPlan plan = make_step_plan(s);
  SimOptions fast;
  fast.progress = false;
  SimOptions step = fast;
  step.fidelity = Fidelity::step;
  step.max_events = 1e8;  // the 64-GPU 70B scenario is ~6e6 events
  const StepResult a = simulate(s, plan, fast);
  SimStats st;
  const StepResult b = simulate(s, plan, step, &st);
  const double err = std::abs(a.step_time_s - b.step_time_s) / b.step_time_s;
  const double comm_err = b.comm_busy_s > 0 ? std::abs(a.comm_busy_s - b.comm_busy_s) / b.comm_busy_s : 0;
  std::cout << file.filename().string() << ": step " << a.step_time_s << " s (fast) vs " << b.step_time_s
            << " s (step), error " << 100 * err << "%; communication busy error " << 100 * comm_err << "%\n";
  INFO(file.string());
  CHECK(err < 0.005);
  CHECK(comm_err < 0.005);
  // The count the run was admitted on: exact for one rank class; with pipeline stages it counts every class while
  // SimStats::events is the first class's, so it bounds it from above by at most the number of stages.
  CHECK(st.estimated_events >= static_cast<double>(st.events));
  CHECK(st.estimated_events <= static_cast<double>(s.parallelism.pipeline) * static_cast<double>(st.events) * 1.5);
}

}  // namespace

TEST_CASE("fast fidelity agrees with step fidelity on shipped scenarios with n <= 64", "[sim][fidelity]") {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(DPSIM_SOURCE_DIR) / "scenarios"))
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  REQUIRE(!files.empty());
  for (const auto& f : files) compare(f);
}

namespace {

struct BothFidelities {
  double fast_s = 0, step_s = 0;  // the call's duration
  dpsim::SimStats step;           // the step-fidelity run's counts
};

// One all-reduce of `bytes` on `t` with `algorithm` pinned (Simple), in both fidelities.
BothFidelities one_call(const Topology& t, Algorithm algorithm, long long bytes) {
  const Scenario s = dpsim::test::scenario_on(t, algorithm, Protocol::simple);
  const StepPlan plan = dpsim::test::one_bucket_plan(t.nodes * t.gpus_per_node, bytes);
  SimOptions o;
  o.progress = false;
  BothFidelities out;
  const StepResult fast = simulate(s, plan, o);
  o.fidelity = Fidelity::step;
  const StepResult step = simulate(s, plan, o, &out.step);
  REQUIRE(fast.buckets.at(0).algorithm == to_string(algorithm));
  REQUIRE(step.buckets.at(0).algorithm == to_string(algorithm));
  out.fast_s = fast.buckets[0].end_s - fast.buckets[0].start_s;
  out.step_s = step.buckets[0].end_s - step.buckets[0].start_s;
  std::cout << to_string(algorithm) << " " << bytes << " B: fast " << out.fast_s * 1e6 << " us, step "
            << out.step_s * 1e6 << " us, " << out.step.flows << " flows, events " << out.step.events << " (estimated "
            << out.step.estimated_events << ")\n";
  return out;
}

Topology with_nvls(Topology t) {
  t.intra.nvls = true;
  return t;
}

Topology with_sharp(Topology t) {
  t.network.sharp = true;
  return t;
}

}  // namespace

// Each algorithm runs NCCL's steps (data/nccl.yaml step_chunks), not one round: the flows the engine ran are exactly
// steps x the flows of one step, counted here by hand. Uncontended, step and fast agree within 0.1% (the rounds move
// what the whole-call flows move, each round paced by the same bottleneck); the event estimate is exact for one rank
// class.
TEST_CASE("step fidelity runs the tree, NVLS, NVLSTree and CollNetChain as NCCL's steps and agrees with fast",
          "[sim][fidelity]") {
  using dpsim::test::ib_cluster;
  using dpsim::test::nvswitch_node;
  struct Case {
    Topology topology;
    Algorithm algorithm;
    long long bytes;
    int64_t steps, flows_per_step;
  };
  const std::vector<Case> cases = {
      // 64 MiB over 8 NIC channels: 8 MiB each in 512 KiB chunks = 16 steps; a step: the two nodes' chains (7 edges
      // each way) and the two trees' one edge each way on 8 channels: 28 + 32 flows.
      {ib_cluster(2), Algorithm::tree, 64ll << 20, 16, 28 + 32},
      // 64 MiB over 16 NVLS channels: 4 MiB each, chunk 64 KiB (below 64 loops of 8 x 128 KiB): 4 MiB / (8 x 64 KiB)
      // = 8 steps of 8 GPU -> switch and 8 switch -> GPU flows.
      {with_nvls(nvswitch_node(8)), Algorithm::nvls, 64ll << 20, 8, 16},
      // 256 MiB over 16 NVLS channels: 16 MiB each, chunk 64 KiB (the tree's cap from 4 nodes): 32 steps of 4 x 16
      // NVLS flows and 2 trees x 3 edges x 8 channels each way.
      {with_nvls(ib_cluster(4)), Algorithm::nvlstree, 256ll << 20, 32, 64 + 96},
      // CollNetChain on SHARP switches: 256 MiB over 8 NIC channels, 32 MiB each in 128 KiB chunks (256 KiB halved
      // once: 128 chunks < the chain's 8 GPUs x 64) = 256 steps of the 4 chains (7 edges each way) and each node's
      // 8 channels to the network: 56 + 32 flows.
      {with_sharp(ib_cluster(4)), Algorithm::collnet_chain, 256ll << 20, 256, 56 + 32},
  };
  for (const Case& c : cases) {
    INFO(to_string(c.algorithm));
    const BothFidelities r = one_call(c.topology, c.algorithm, c.bytes);
    CHECK(std::abs(r.step_s - r.fast_s) <= 1e-3 * r.fast_s);
    CHECK(r.step.flows == c.steps * c.flows_per_step);
    CHECK(r.step.estimated_events == Approx(static_cast<double>(r.step.events)).epsilon(0));
  }
}
