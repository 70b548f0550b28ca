// Speed benchmark of the simulator (prints figures; not a pass/fail test).
//   dpsim_bench_sim [SCENARIO...] [--fidelity fast|step] [--max-events N] [--dpsim PATH] [--runs N]
//                   [--sweep-points N] [--jobs N] [--no-process] [--no-scale]
// Default: the two scale scenarios of issue 3 (1024 and 16384 H100s, Llama 3.1 8B) and a zero3 step of Llama 3.1
// 70B on 1024 H100s (bench/scenarios/, issue 14's target: under 1 s) and a 3D step of it (tensor 8 x pipeline 8 x
// data 16, 16 micro-batches, 1F1B: issue 16's target, under 1 s), simulated in this process; then the 3D step at
// 16384 GPUs (issue 16: under 10 s) and the 16384-GPU DDP step at 131072, 524288 and 1048576 GPUs (issue 18: no
// scale crashes or crawls); --no-scale skips these; then whole
// processes as a user runs them (issue 18's targets: dpsim --version and estimate under 20 ms and 30 MB), and
// --sweep-points points (default 1,000) of scenarios/sweeps/bench-1000x1024.yaml at --jobs (default 2) workers
// (target: 2,000,000 points/hour on 2 cores). Each row prints the events the run simulated and the estimate it was
// admitted on (--max-events, default 5e6).
#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dpsim/load.hpp"
#include "dpsim/plan.hpp"
#include "dpsim/sim/simulate.hpp"
#include "dpsim/sweep_spec.hpp"
#include "process_figures.hpp"

int main(int argc, char** argv) {
  std::vector<std::string> files;
  dpsim::SimOptions options;
  options.progress = false;
  std::string dpsim_binary = DPSIM_BENCH_DPSIM;
  int runs = 5, sweep_points = 1000, jobs = 2;
  bool process = true, scale = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--fidelity" && i + 1 < argc)
      options.fidelity = dpsim::parse_fidelity(argv[++i]);
    else if (a == "--dpsim" && i + 1 < argc)
      dpsim_binary = argv[++i];
    else if (a == "--max-events" && i + 1 < argc)
      options.max_events = std::atof(argv[++i]);
    else if (a == "--runs" && i + 1 < argc)
      runs = std::max(1, std::atoi(argv[++i]));
    else if (a == "--sweep-points" && i + 1 < argc)
      sweep_points = std::max(0, std::atoi(argv[++i]));
    else if (a == "--jobs" && i + 1 < argc)
      jobs = std::max(1, std::atoi(argv[++i]));
    else if (a == "--no-process")
      process = false;
    else if (a == "--no-scale")
      scale = false;
    else
      files.push_back(a);
  }
  if (files.empty()) {
    const auto root = dpsim::data_root();
    files = {(root / "scenarios/llama3.1-8b-1024xh100-ib.yaml").string(),
             (root / "scenarios/llama3.1-8b-16384xh100-ib.yaml").string(),
             (root / "bench/scenarios/llama3.1-70b-zero3-1024xh100-ib.yaml").string(),
             (root / "bench/scenarios/llama3.1-70b-3d-1024xh100-ib.yaml").string()};
  }
  fmt::print("{:<34} {:>7} {:>8} {:>8} {:>9} {:>9} {:>9} {:>10} {:>12} {:>9} {:>10}\n", "scenario", "GPUs", "calls",
             "flows", "events", "estimate", "wall s", "engine s", "events/s", "RSS MB", "step s");
  // One row: the scenario (with `nodes` nodes when > 0) simulated in this process.
  auto row = [&](const std::string& f, int nodes) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<dpsim::Override> sets;
    if (nodes > 0) sets.push_back({"cluster.nodes", std::to_string(nodes)});
    const dpsim::Scenario s = dpsim::load_scenario(f, sets);
    const dpsim::StepPlan plan = dpsim::make_step_plan(s);
    const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    dpsim::SimStats st;
    const dpsim::StepResult r = dpsim::simulate(s, plan, options, &st);
    fmt::print("{:<34} {:>7} {:>8} {:>8} {:>9} {:>9.3g} {:>9.3f} {:>10.3f} {:>12.0f} {:>9.1f} {:>10.4f}\n", s.name,
               plan.world_size, r.comm.size(), st.flows, st.events, st.estimated_events, st.wall_s, st.simulate_wall_s,
               st.simulate_wall_s > 0 ? static_cast<double>(st.events) / st.simulate_wall_s : 0.0,
               static_cast<double>(st.peak_rss_bytes) / 1e6, r.step_time_s);
    fmt::print("  (load + plan {:.3f} s; platform {} hosts, {} links)\n", load_s, st.hosts, st.links);
  };
  try {
    for (const auto& f : files) row(f, 0);
    // Issue 16's 3D step at 16384 GPUs; issue 18's rows: the 16384-GPU step at 2^17, 2^19 and 2^20 GPUs (the
    // most a scenario may have).
    if (scale && options.fidelity == dpsim::Fidelity::fast)
      row((dpsim::data_root() / "bench/scenarios/llama3.1-70b-3d-1024xh100-ib.yaml").string(), 2048);
    if (scale && options.fidelity == dpsim::Fidelity::fast)
      for (int nodes : {16384, 65536, 131072})
        row((dpsim::data_root() / "scenarios/llama3.1-8b-16384xh100-ib.yaml").string(), nodes);
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 1;
  }
  if (!process) return 0;
  const auto root = dpsim::data_root();
  dpsim::bench::print_process_figures(dpsim_binary, root, runs);
  if (sweep_points > 0 &&
      !dpsim::bench::print_sweep_rate(dpsim_binary, root / "scenarios/sweeps/bench-1000x1024.yaml", sweep_points, jobs))
    return 1;
  return 0;
}
