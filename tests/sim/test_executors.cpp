// The three executors of the step program (the simulator's actors, the backend's dry run, the closed-form
// estimate) run the same program on every shipped scenario: the same instructions in the same order per stream.
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <set>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "../shipped_scenarios.hpp"
#include "dpsim/analytic.hpp"
#include "dpsim/backend/executor.hpp"
#include "dpsim/backend/measure.hpp"
#include "dpsim/backend/shard_buffers.hpp"
#include "dpsim/load.hpp"
#include "dpsim/program.hpp"
#include "dpsim/sim/simulate.hpp"
#include "dpsim/sweep_spec.hpp"

using namespace dpsim;

namespace {

// The program's instructions, per stream, as describe() lists them.
std::map<int, std::vector<std::string>> expected_per_stream(const StepProgram& p) {
  std::map<int, std::vector<std::string>> out;
  const RankProgram& r = p.classes.front();
  for (const Instr& in : r.instrs) out[in.stream].push_back(describe(in, p, r));
  return out;
}

// Records what the closed-form executor was handed, per stream, and runs it.
struct Logged final : StepExecutor {
  AnalyticExecutor& inner;
  const StepProgram& p;
  const RankProgram& rank;
  std::map<int, std::vector<std::string>> log;
  Logged(AnalyticExecutor& a, const StepProgram& prog, const RankProgram& r) : inner(a), p(prog), rank(r) {}
  void note(const Instr& in) { log[in.stream].push_back(describe(in, p, rank)); }
  void forward(const Instr& in) override {
    note(in);
    inner.forward(in);
  }
  void backward(const Instr& in) override {
    note(in);
    inner.backward(in);
  }
  void collective(const Instr& in, const CommCall& c) override {
    note(in);
    inner.collective(in, c);
  }
  void record(const Instr& in) override {
    note(in);
    inner.record(in);
  }
  void wait(const Instr& in) override {
    note(in);
    inner.wait(in);
  }
  void unflatten(const Instr& in) override {
    note(in);
    inner.unflatten(in);
  }
  void optimizer(const Instr& in) override {
    note(in);
    inner.optimizer(in);
  }
  void mark(const Instr& in) override {
    note(in);
    inner.mark(in);
  }
};

// The dry run's launches mapped back to the instruction each belongs to (an op's kernels collapse into one),
// per stream.
std::map<int, std::vector<std::string>> from_launches(const StepProgram& p, const std::vector<backend::Launch>& ls) {
  using backend::Launch;
  using backend::MemoryRole;
  const RankProgram& r = p.classes.front();
  std::map<int, std::vector<std::string>> out;
  int micro = 0;
  auto add = [&](const Instr& in) {
    auto& v = out[in.stream];
    const std::string line = describe(in, p, r);
    if (v.empty() || v.back() != line) v.push_back(line);
  };
  auto op_instr = [&](bool forward, int op) {
    return Instr{.type = forward ? Instr::Type::forward : Instr::Type::backward,
                 .stream = 0,
                 .op = op,
                 .micro = micro,
                 .sync = !forward && micro == p.micro_steps - 1};
  };
  auto event = [](backend::EventRef e) { return EventRef{e.kind, e.bucket}; };
  auto stream = [](backend::Stream s) {
    return s == backend::Stream::compute ? StepProgram::kCompute
           : s == backend::Stream::comm  ? StepProgram::kComm
                                         : StepProgram::kAllReduce;
  };
  for (const Launch& l : ls) {
    switch (l.type) {
      case Launch::Type::gemm:
      case Launch::Type::batched_gemm:
        add(op_instr(l.gemm_call.role == backend::GemmRole::forward, l.gemm_call.op));
        break;
      case Launch::Type::memory:
        if (l.memory_call.role == MemoryRole::bucket_to_grad)
          add({.type = Instr::Type::unflatten, .stream = 0});
        else
          add(op_instr(l.memory_call.role == MemoryRole::forward, l.memory_call.op));
        break;
      case Launch::Type::record:
        add({.type = Instr::Type::record, .stream = stream(l.stream), .event = event(l.event)});
        break;
      case Launch::Type::wait:
        add({.type = Instr::Type::wait, .stream = stream(l.stream), .event = event(l.event)});
        break;
      case Launch::Type::allreduce: {
        int call = 0;
        while (r.comms[static_cast<size_t>(call)].bucket != l.bucket) ++call;
        add({.type = Instr::Type::collective, .stream = 1, .comm = call});
        break;
      }
      case Launch::Type::collective: {
        int call = 0;
        while (r.comms[static_cast<size_t>(call)].kind != l.call.kind ||
               r.comms[static_cast<size_t>(call)].group != l.call.group ||
               r.comms[static_cast<size_t>(call)].index != l.call.index)
          ++call;
        add({.type = Instr::Type::collective, .stream = stream(l.stream), .comm = call});
        break;
      }
      case Launch::Type::optimizer: add({.type = Instr::Type::optimizer, .stream = 0}); break;
      case Launch::Type::mark:
        if (l.mark_kind == Mark::forward_begin) micro = l.index;
        add({.type = Instr::Type::mark, .stream = stream(l.stream), .mark = l.mark_kind, .mark_index = l.index});
        break;
      case Launch::Type::send:  // pipeline stages' transfers and spans: tests/backend/test_pipeline_dry_run.cpp,
      case Launch::Type::recv:  // test_measure_pipeline.cpp
      case Launch::Type::stage_work: FAIL("a pipeline stage's launch in a program without stages"); break;
    }
  }
  return out;
}

// Is `sub` the program's list with only instructions removed that launch nothing (compute ops without kernels)?
// `lone` lists the groups of one rank, whose collectives launch nothing (the backend's walker skips them).
bool same_but_kernel_less_ops(const std::vector<std::string>& program, const std::vector<std::string>& sub,
                              const std::set<std::string>& lone) {
  size_t j = 0;
  for (const std::string& line : program) {
    if (j < sub.size() && sub[j] == line) {
      ++j;
      continue;
    }
    const bool op = line.find(" forward op ") != std::string::npos || line.find(" backward op ") != std::string::npos;
    bool lone_call = false;
    for (const std::string& g : lone)
      lone_call |= line.find(" collective ") != std::string::npos && line.find(" " + g + " #") != std::string::npos;
    if (!op && !lone_call && line.find(" unflatten") == std::string::npos)
      return false;  // a call, event or mark went missing
  }
  return j == sub.size();
}

// The simulator, the closed form and the dry run execute `s`'s step program: the same instructions per stream.
// Returns the program's stream count.
size_t check_same_program(const Scenario& s) {
  const StepPlan plan = make_step_plan(s);
  const StepProgram p = make_step_program(plan);
  const auto expected = expected_per_stream(p);

  // The simulator: what each stream's actor ran, in its order.
  SimOptions so;
  so.record_program = true;
  so.progress = false;
  SimStats stats;
  simulate(s, plan, so, &stats);
  std::vector<std::string> all;
  for (const auto& [stream, lines] : expected) all.insert(all.end(), lines.begin(), lines.end());
  CHECK(stats.executed == all);

  // The closed form: what it was handed, per stream (every class walked together: pipeline stages wait for each
  // other; the first class's log is compared).
  EventTimes crossed;
  std::vector<std::unique_ptr<AnalyticExecutor>> analytic;
  std::vector<std::unique_ptr<Logged>> logged;
  std::vector<StepExecutor*> executors;
  for (size_t c = 0; c < p.classes.size(); ++c) {
    analytic.push_back(std::make_unique<AnalyticExecutor>(s, plan, p, c, &crossed));
    logged.push_back(std::make_unique<Logged>(*analytic.back(), p, p.classes[c]));
    executors.push_back(logged.back().get());
  }
  walk_classes(p, executors);
  CHECK(logged.front()->log == expected);
  // Context parallelism: `dpsim measure` refuses it (app/cmd_measure.cpp), so the backend has no dry run of it.
  if (p.dims.context > 1) return p.streams.size();
  // The dry run: its launches, mapped back to instructions.
  const backend::StepLayout layout =
      backend::make_layout(plan, dtype_bytes(s.training.param_dtype), s.ddp.gradient_as_bucket_view);
  // With the buffer plan the CUDA executor uses: it has buffers for every collective of the program.
  const backend::ShardBuffers buffers = backend::plan_shard_buffers(plan, p, layout, 0);
  backend::DryRunExecutor dry(&buffers);
  backend::WalkOptions wo;
  wo.gradient_accumulation = plan.gradient_accumulation;
  backend::walk_step(plan, layout, wo, dry);
  // Pipeline stages: the dry run runs the first stage; its launches carry no micro-batch marks to map back by, so
  // only that it runs with its buffer plan is checked here (tests/core/test_pipeline_program.cpp checks the program).
  if (p.classes.size() > 1) {
    CHECK(!dry.launches().empty());
    return p.streams.size();
  }
  const auto launched = from_launches(p, dry.launches());
  REQUIRE(launched.size() == expected.size());
  std::set<std::string> lone;
  for (GroupKind g : {GroupKind::data, GroupKind::tensor, GroupKind::pipeline, GroupKind::shard, GroupKind::replica})
    if (group_of(0, g, p.dims).ranks.size() == 1) lone.insert(to_string(g));
  for (const auto& [stream, lines] : expected) {
    INFO("stream " << p.streams[static_cast<size_t>(stream)]);
    CHECK(same_but_kernel_less_ops(lines, launched.at(stream), lone));
  }
  return p.streams.size();
}

}  // namespace

TEST_CASE("simulator, dry-run backend and estimate execute the same step program on every shipped scenario") {
  int checked = 0, hybrid = 0;
  for (const auto& path : test::shipped_scenarios()) {
    INFO("scenario " << path.filename().string());
    const size_t streams = check_same_program(load_scenario(path));
    ++checked;
    hybrid += streams == 3 ? 1 : 0;  // HSDP: the replica all-reduces on their own stream, executed by all three
  }
  CHECK(checked >= 10);
  CHECK(hybrid >= 1);
}

TEST_CASE("the three executors run DeepSpeed's stage 1 and 2 programs alike, with and without overlap_comm") {
  const auto file = std::filesystem::path(DPSIM_SOURCE_DIR) / "scenarios/llama3.1-8b-deepspeed-zero2-8xh100.yaml";
  for (const char* stage : {"1", "2"})
    for (const char* overlap : {"false", "true"}) {
      INFO("stage " << stage << " overlap_comm " << overlap);
      check_same_program(load_scenario(file, {{"parallelism.sharding", std::string("zero") + stage},
                                              {"zero_optimization.stage", stage},
                                              {"zero_optimization.overlap_comm", overlap},
                                              {"zero_optimization.reduce_bucket_size", "1e8"}}));
    }
}
