// Measured pipeline steps: a stage's compute-stream spans (the walker's stage_work, add_stage_spans) and the
// assembly of every rank's samples into stages[] and step.* (assemble_result), as predict reports them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "../shipped_scenarios.hpp"
#include "../source_dir.hpp"
#include "dpsim/backend/executor.hpp"
#include "dpsim/backend/measure.hpp"
#include "dpsim/error.hpp"
#include "dpsim/load.hpp"
#include "dpsim/p2p_batch.hpp"
#include "dpsim/result.hpp"
#include "dpsim/sweep_spec.hpp"

using namespace dpsim;
using namespace dpsim::backend;

namespace {

std::string src(const std::string& rel) { return std::string(DPSIM_SOURCE_DIR) + "/" + rel; }

MeasureContext context_of(const Scenario& s) {
  MeasureContext ctx;
  ctx.gpu_name = "NVIDIA H100 80GB HBM3";
  ctx.gpu_count = s.world_size();
  ctx.scenario_world_size = s.world_size();
  ctx.host = "test";
  ctx.git_revision = "abc";
  ctx.warmup = 3;
  return ctx;
}

// What one stage's ranks measure per iteration (seconds): each rank adds `rank_slowdown` x its index in the stage
// to every figure, iteration i adds 0.01 x i to its neighbour wait (the step grows with it).
struct StageFigures {
  double forward = 0, backward = 0, optimizer = 0, tensor = 0, p2p = 0, neighbour = 0, exposed = 0;
  double bucket_s = 0.002;  // each of its buckets' all-reduce
};

StepSample sample_of(const StepPlan& plan, int stage, const StageFigures& f, double slowdown, int iteration) {
  StepSample s;
  s.stage = stage;
  s.forward_s = f.forward + slowdown;
  s.backward_s = f.backward + slowdown;
  s.optimizer_s = f.optimizer;
  s.tensor_comm_s = f.tensor;
  s.p2p_s = f.p2p;
  s.neighbour_wait_s = f.neighbour + 0.01 * iteration;
  s.exposed_comm_s = f.exposed;
  s.step_s =
      s.forward_s + s.backward_s + s.optimizer_s + s.tensor_comm_s + s.p2p_s + s.neighbour_wait_s + s.exposed_comm_s;
  s.buckets.resize(plan.buckets.size());
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    if (plan.buckets[b].stage != stage) continue;
    const double ready = s.forward_s + 0.001 * static_cast<double>(b);
    s.buckets[b] = {ready, ready + 0.0005, ready + 0.0005 + f.bucket_s};
  }
  return s;
}

// samples[rank][iteration] for every rank of `plan`, its stage's figures; a rank of the stage's data-parallel index
// d is d x 1 ms slower (the stage's slowest is its last).
std::vector<std::vector<StepSample>> pipeline_samples(const StepPlan& plan, const std::vector<StageFigures>& stages,
                                                      int iters) {
  std::vector<std::vector<StepSample>> samples(static_cast<size_t>(plan.world_size));
  for (int r = 0; r < plan.world_size; ++r) {
    const int stage = rank_stage(plan, r);
    const double slowdown = 0.001 * coords_of(r, plan.dims).data;
    for (int i = 0; i < iters; ++i)
      samples[static_cast<size_t>(r)].push_back(
          sample_of(plan, stage, stages[static_cast<size_t>(stage)], slowdown, i));
  }
  return samples;
}

double median_of(std::vector<double> v) { return percentile(std::move(v), 0.5); }

}  // namespace

TEST_CASE("a stage's compute-stream spans add up per kind of work, each until the next begins") {
  StepSample s;
  add_stage_spans({StageWork::neighbour_wait, StageWork::forward, StageWork::tensor_comm, StageWork::forward,
                   StageWork::p2p, StageWork::backward, StageWork::own_comm_wait, StageWork::optimizer},
                  {0.0, 0.5, 1.5, 1.75, 2.75, 3.0, 5.0, 5.25}, 5.5, s);
  CHECK(s.neighbour_wait_s == 0.5);
  CHECK(s.forward_s == 1.0 + 1.0);
  CHECK(s.tensor_comm_s == 0.25);
  CHECK(s.p2p_s == 0.25);
  CHECK(s.backward_s == 2.0);
  CHECK(s.exposed_comm_s == 0.25);
  CHECK(s.optimizer_s == 0.25);
  StepSample bad;
  CHECK_THROWS_WITH(add_stage_spans({StageWork::forward, StageWork::backward}, {0.0, 1.0}, 0.5, bad),
                    Catch::Contains("span 1 (backward) ends at 0.5 s before it begins at 1 s"));
  CHECK_THROWS_WITH(add_stage_spans({StageWork::forward}, {0.0, 1.0}, 2.0, bad), Catch::Contains("1 spans with 2"));
}

TEST_CASE("tensor 8 x pipeline 2: stages[] per stage from its slowest rank, step.* the stage with the most compute") {
  const Scenario s = load_scenario(src("scenarios/llama3.1-70b-tp8-pp2-64xh100.yaml"));
  const StepPlan plan = make_step_plan(s);
  REQUIRE(plan.pipeline.stages == 2);
  REQUIRE(plan.dims.tensor == 8);
  REQUIRE(plan.dims.data == 4);
  // Stage 1 computes more (reported); stage 0 waits longer for its neighbour and ends last.
  const std::vector<StageFigures> figures = {{2.0, 4.0, 0.1, 1.0, 0.2, 1.0, 0.05},
                                             {2.2, 4.4, 0.1, 1.1, 0.15, 0.3, 0.04}};
  const int iters = 5;
  const auto samples = pipeline_samples(plan, figures, iters);
  const StepResult r = assemble_result(s, plan, context_of(s), samples);

  REQUIRE(r.stages.size() == 2);
  const double slowest = 0.001 * 3;  // data-parallel index 3 of 4
  for (int k = 0; k < 2; ++k) {
    INFO("stage " << k);
    const StageTiming& t = r.stages[static_cast<size_t>(k)];
    const StageFigures& f = figures[static_cast<size_t>(k)];
    CHECK(t.stage == k);
    CHECK(t.forward_s == Approx(f.forward + slowest));
    CHECK(t.backward_s == Approx(f.backward + slowest));
    CHECK(t.optimizer_s == Approx(f.optimizer));
    CHECK(t.tensor_comm_s == Approx(f.tensor));
    CHECK(t.p2p_s == Approx(f.p2p));
    CHECK(t.exposed_comm_s == Approx(f.exposed));
    CHECK(t.bubble_s == Approx(f.neighbour + 0.02));  // the median iteration's wait for its neighbour
    CHECK(t.end_s == Approx(f.forward + f.backward + 2 * slowest + f.optimizer + f.tensor + f.p2p + f.neighbour + 0.02 +
                            f.exposed));
    CHECK(t.forward_s + t.backward_s + t.optimizer_s + t.tensor_comm_s + t.p2p_s + t.exposed_comm_s + t.bubble_s ==
          Approx(t.end_s));
    int own = 0;
    for (const Bucket& b : plan.buckets) own += b.stage == k ? 1 : 0;
    CHECK(t.comm_busy_s == Approx(own * f.bucket_s));
    CHECK(t.memory_need_bytes ==
          Approx(plan.pipeline.stage[static_cast<size_t>(k)].memory.total_bytes() + r.runtime_bytes_per_gpu()));
  }
  // The step is the slowest rank's: stage 0 ends last; step.* describes stage 1, which waits for it too.
  CHECK(r.step_time_s == Approx(r.stages[0].end_s));
  CHECK(r.step_time_s > r.stages[1].end_s);
  CHECK(r.reported_stage == 1);
  CHECK(r.forward_s == Approx(r.stages[1].forward_s));
  CHECK(r.backward_s == Approx(r.stages[1].backward_s));
  CHECK(r.tensor_comm_s == Approx(1.1));
  CHECK(r.p2p_s == Approx(0.15));
  CHECK(r.exposed_comm_s == Approx(0.04));
  CHECK(r.pipeline_bubble_s == Approx(r.stages[1].bubble_s + r.step_time_s - r.stages[1].end_s));
  CHECK(r.spreads.at("step.time_s").at("median").get<double>() == Approx(r.step_time_s));
  CHECK(r.spreads.at("step.p2p_s").at("median").get<double>() == Approx(0.15));
  CHECK(r.spreads.at("step.tensor_comm_s").at("median").get<double>() == Approx(1.1));
  CHECK(r.spreads.at("step.forward_s").at("median").get<double>() == Approx(r.forward_s));
  // Throughput: each of the 4 data-parallel replicas trains its 16 micro-batches of 1 sequence.
  CHECK(r.samples_per_s == Approx(4.0 * 16 / r.step_time_s));
  CHECK(r.tokens_per_s == Approx(r.samples_per_s * 8192));
  CHECK(r.scaling_efficiency == Approx((r.forward_s + r.backward_s + r.optimizer_s) / r.step_time_s));
  // Buckets: every stage's, each timed by its own stage's slowest rank.
  REQUIRE(r.buckets.size() == plan.buckets.size());
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const int k = plan.buckets[b].stage;
    CHECK(r.buckets[b].index == static_cast<int>(b));
    CHECK(r.buckets[b].ready_s ==
          Approx(figures[static_cast<size_t>(k)].forward + slowest + 0.001 * static_cast<double>(b)));
  }

  const StepResult back = result_from_json(nlohmann::json::parse(to_json(r).dump()));
  CHECK(back.reported_stage == 1);
  REQUIRE(back.stages.size() == 2);
  CHECK(back.stages[0].bubble_s == Approx(r.stages[0].bubble_s));
  CHECK(back.pipeline_bubble_s == Approx(r.pipeline_bubble_s));
}

TEST_CASE("four stages: the step ends with the last rank, each stage's bubble what its step leaves") {
  const Scenario s = load_scenario(src("scenarios/gpt2-1.5b-16xh100-ib.yaml"),
                                   {{"parallelism.pipeline", "4"}, {"training.gradient_accumulation", "8"}});
  const StepPlan plan = make_step_plan(s);
  REQUIRE(plan.pipeline.stages == 4);
  REQUIRE(plan.dims.data == 4);
  // Stage 2 computes the most; stage 3 ends last (its tied embedding's all-reduce in p2p).
  const std::vector<StageFigures> figures = {{1.0, 2.0, 0.05, 0, 0.3, 0.6, 0.01},
                                             {1.0, 2.1, 0.05, 0, 0.2, 0.5, 0.01},
                                             {1.1, 2.2, 0.05, 0, 0.2, 0.3, 0.01},
                                             {0.9, 1.9, 0.05, 0, 0.9, 0.6, 0.02}};
  const auto samples = pipeline_samples(plan, figures, 4);
  const StepResult r = assemble_result(s, plan, context_of(s), samples);
  REQUIRE(r.stages.size() == 4);
  CHECK(r.reported_stage == 2);
  std::vector<double> ends;
  for (const StageTiming& t : r.stages) {
    ends.push_back(t.end_s);
    CHECK(t.bubble_s == Approx(figures[static_cast<size_t>(t.stage)].neighbour + 0.015));  // iterations 0..3
  }
  CHECK(r.step_time_s == Approx(*std::max_element(ends.begin(), ends.end())));
  CHECK(r.step_time_s == Approx(r.stages[3].end_s));
  CHECK(r.pipeline_bubble_s == Approx(0.3 + 0.015 + r.stages[3].end_s - r.stages[2].end_s));
  CHECK(r.p2p_s == Approx(0.2));
  CHECK(r.tensor_comm_s == 0);
  CHECK(r.samples_per_s == Approx(4.0 * 4 * 8 / r.step_time_s));  // 4 replicas x micro-batch 4 x 8 micro-batches
  // The step's spread is over iterations of the slowest rank of all.
  std::vector<double> steps;
  for (size_t i = 0; i < 4; ++i) {
    double slowest = 0;
    for (const auto& rank : samples) slowest = std::max(slowest, rank[i].step_s);
    steps.push_back(slowest);
  }
  CHECK(r.spreads.at("step.time_s").at("p90").get<double>() == Approx(percentile(steps, 0.9)));
  CHECK(r.spreads.at("step.time_s").at("median").get<double>() == Approx(median_of(steps)));
}

TEST_CASE("pipeline samples are checked: every stage run, each rank's stage the same throughout") {
  const Scenario s = load_scenario(src("scenarios/gpt2-1.5b-16xh100-ib.yaml"),
                                   {{"parallelism.pipeline", "4"}, {"training.gradient_accumulation", "8"}});
  const StepPlan plan = make_step_plan(s);
  const std::vector<StageFigures> figures(4, StageFigures{1.0, 2.0, 0.05, 0, 0.3, 0.6, 0.01});
  auto samples = pipeline_samples(plan, figures, 3);
  for (auto& rank : samples)
    for (StepSample& x : rank)
      if (x.stage == 3) x.stage = 2;
  CHECK_THROWS_WITH(assemble_result(s, plan, context_of(s), samples), Catch::Contains("no rank ran pipeline stage 3"));
  samples = pipeline_samples(plan, figures, 3);
  samples[5][2].stage = 0;
  CHECK_THROWS_WITH(assemble_result(s, plan, context_of(s), samples),
                    Catch::Contains("rank 5 has a sample of stage 0"));
  samples = pipeline_samples(plan, figures, 3);
  samples[0][0].stage = 7;
  CHECK_THROWS_AS(assemble_result(s, plan, context_of(s), samples), RuntimeError);

  const Scenario ddp = load_scenario(src("scenarios/gpt2-1.5b-16xh100-ib.yaml"));
  const StepPlan ddp_plan = make_step_plan(ddp);
  std::vector<std::vector<StepSample>> one(1, std::vector<StepSample>(1));
  one[0][0].buckets.resize(ddp_plan.buckets.size());
  one[0][0].stage = 0;
  CHECK_THROWS_WITH(assemble_result(ddp, ddp_plan, context_of(ddp), one),
                    Catch::Contains("a sample of pipeline stage 0 in a step without stages"));
}

namespace {

// A stand-in for one stage's GPU: the walker drives the dry run, and each launch it records takes a made-up time on
// the compute stream, one after another (GEMMs at 1 PFLOP/s, memory kernels at 2 TB/s, blocking collectives and
// transfers at 100 GB/s, a wait 0.1 ms, the optimizer 1 ms); the stage_work spans are timed on it as the CUDA
// executor times them (an event where each begins, optimizer_end the last one's end).
struct FakeStage {
  std::map<StageWork, double> by_launch;  // each launch's time by what it is, read off the launch itself
  StepSample sample;                      // from the spans (add_stage_spans)
  int misplaced = 0;                      // timed launches inside a span of other work
};

double seconds_of(const Launch& l) {
  switch (l.type) {
    case Launch::Type::gemm:
    case Launch::Type::batched_gemm: return l.gemm_call.flops() / 1e15;
    case Launch::Type::memory: return l.memory_call.bytes / 2e12;
    case Launch::Type::optimizer: return 1e-3;
    case Launch::Type::collective: return l.stream == Stream::compute ? l.call.bytes / 1e11 : 0.0;
    case Launch::Type::send:
    case Launch::Type::recv: return l.p2p.bytes / 1e11;
    case Launch::Type::wait: return l.stream == Stream::compute ? 1e-4 : 0.0;
    default: return 0.0;
  }
}

// What a launch is, from the launch alone: the role of a GEMM or memory kernel, the group of a blocking collective,
// whether a transfer's batch sends.
StageWork work_of(const Launch& l, const std::map<int, bool>& batch_sends) {
  switch (l.type) {
    case Launch::Type::gemm:
    case Launch::Type::batched_gemm:
      return l.gemm_call.role == GemmRole::forward ? StageWork::forward : StageWork::backward;
    case Launch::Type::memory:
      if (l.memory_call.role == MemoryRole::forward) return StageWork::forward;
      return l.memory_call.role == MemoryRole::bucket_to_grad ? StageWork::optimizer : StageWork::backward;
    case Launch::Type::optimizer: return StageWork::optimizer;
    case Launch::Type::collective:
      return l.call.group == GroupKind::embedding ? StageWork::p2p : StageWork::tensor_comm;
    case Launch::Type::send:
    case Launch::Type::recv: return batch_sends.at(l.batch) ? StageWork::p2p : StageWork::neighbour_wait;
    default: return StageWork::own_comm_wait;  // a wait on the compute stream
  }
}

FakeStage fake_stage(const Scenario& s, const StepPlan& plan, const PreparedStep& step, int stage) {
  const StepLayout layout =
      make_layout(plan, dtype_bytes(s.training.param_dtype), s.ddp.gradient_as_bucket_view, stage);
  DryRunExecutor dry;
  WalkOptions wo;
  wo.gradient_accumulation = plan.gradient_accumulation;
  wo.stage = stage;
  walk_step(plan, layout, wo, step, dry);
  std::map<int, bool> batch_sends;
  for (const Launch& l : dry.launches())
    if (l.type == Launch::Type::send || l.type == Launch::Type::recv)
      batch_sends[l.batch] = batch_sends[l.batch] || l.type == Launch::Type::send;

  FakeStage f;
  double clock = 0, begin = -1, end = -1;
  std::vector<StageWork> works;
  std::vector<double> begins;
  for (const Launch& l : dry.launches()) {
    if (l.type == Launch::Type::mark && l.mark_kind == Mark::step_begin) begin = clock;
    if (l.type == Launch::Type::mark && l.mark_kind == Mark::optimizer_end) end = clock;
    if (l.type == Launch::Type::stage_work) {
      works.push_back(l.work);
      begins.push_back(clock - begin);
    }
    const double t = seconds_of(l);
    if (t <= 0) continue;
    const StageWork w = work_of(l, batch_sends);
    f.by_launch[w] += t;
    if (works.empty() || works.back() != w) ++f.misplaced;
    clock += t;
  }
  REQUIRE(begin == 0);
  REQUIRE(end > 0);
  f.sample.stage = stage;
  f.sample.step_s = end - begin;
  f.sample.buckets.resize(plan.buckets.size());
  add_stage_spans(works, begins, f.sample.step_s, f.sample);
  return f;
}

// Every stage of `s` through the fake GPU, then every rank's samples (its stage's) through assemble_result.
void check_fake_pipeline(const Scenario& s) {
  const StepPlan plan = make_step_plan(s);
  REQUIRE(plan.pipeline.stages > 1);
  std::vector<FakeStage> stages;
  const PreparedStep step = prepare_step(plan, plan.gradient_accumulation);
  for (int k = 0; k < plan.pipeline.stages; ++k) {
    INFO("stage " << k);
    stages.push_back(fake_stage(s, plan, step, k));
    const FakeStage& f = stages.back();
    CHECK(f.misplaced == 0);
    const StepSample& x = f.sample;
    auto launched = [&](StageWork w) { return f.by_launch.count(w) ? f.by_launch.at(w) : 0.0; };
    CHECK(x.forward_s == Approx(launched(StageWork::forward)));
    CHECK(x.backward_s == Approx(launched(StageWork::backward)));
    CHECK(x.optimizer_s == Approx(launched(StageWork::optimizer)));
    CHECK(x.tensor_comm_s == Approx(launched(StageWork::tensor_comm)));
    CHECK(x.p2p_s == Approx(launched(StageWork::p2p)));
    CHECK(x.neighbour_wait_s == Approx(launched(StageWork::neighbour_wait)));
    CHECK(x.exposed_comm_s == Approx(launched(StageWork::own_comm_wait)));
    CHECK(x.forward_s > 0);
    CHECK(x.backward_s > 0);
    CHECK(x.p2p_s + x.neighbour_wait_s > 0);
  }
  std::vector<std::vector<StepSample>> samples;
  for (int r = 0; r < plan.world_size; ++r)
    samples.push_back({stages[static_cast<size_t>(rank_stage(plan, r))].sample});
  const StepResult r = assemble_result(s, plan, context_of(s), samples);
  REQUIRE(r.stages.size() == stages.size());
  size_t most = 0;
  double last = 0;
  for (size_t k = 0; k < stages.size(); ++k) {
    const StepSample& x = stages[k].sample;
    const StageTiming& t = r.stages[k];
    CHECK(t.forward_s == Approx(x.forward_s));
    CHECK(t.p2p_s == Approx(x.p2p_s));
    CHECK(t.tensor_comm_s == Approx(x.tensor_comm_s));
    CHECK(t.bubble_s == Approx(x.neighbour_wait_s));  // the spans cover the whole step
    CHECK(t.end_s == Approx(x.step_s));
    const StepSample& m = stages[most].sample;
    if (x.forward_s + x.backward_s > m.forward_s + m.backward_s) most = k;
    last = std::max(last, x.step_s);
  }
  CHECK(r.reported_stage == static_cast<int>(most));
  CHECK(r.step_time_s == Approx(last));
}

}  // namespace

TEST_CASE("the walker's spans cover a stage's compute stream, each launch in its own work, through to the result") {
  SECTION("every shipped pipeline scenario") {
    int scenarios = 0;
    for (const auto& path : test::shipped_scenarios()) {
      const Scenario s = load_scenario(path);
      if (s.parallelism.pipeline < 2 || s.parallelism.pipeline * s.training.gradient_accumulation > 1536) continue;
      if (s.parallelism.context > 1) continue;  // measure refuses context parallelism (app/cmd_measure.cpp)
      INFO("scenario " << path.filename().string());
      check_fake_pipeline(s);
      ++scenarios;
    }
    CHECK(scenarios == 2);
  }
  SECTION("the Megatron reference scenarios with pipeline stages, their reductions overlapped") {
    // Each reduces its gradients after the backward (Megatron's local DDP), which the backend does not run
    // (backward_done): the same stages with PyTorch DDP's overlapped buckets; and the tensor-parallel calls on the
    // compute stream, as the backend runs them (it refuses Transformer Engine's overlap). Those of up to 1536 stage
    // micro-batches: all fourteen take some 25 s here (each walk expands every micro-batch of its stage into kernels).
    std::vector<std::string> walked;
    for (const auto& e : std::filesystem::directory_iterator(src("validation/reference/scenarios/megatron"))) {
      const Scenario s =
          e.path().extension() == ".yaml"
              ? load_scenario(e.path(), {{"ddp.overlap_grad_reduce", "true"}, {"parallelism.tp_comm_overlap", "false"}})
              : Scenario{};
      if (s.parallelism.pipeline < 2 || s.parallelism.pipeline * s.training.gradient_accumulation > 1536) continue;
      if (s.parallelism.context > 1) continue;  // measure refuses context parallelism (app/cmd_measure.cpp)
      INFO("scenario " << e.path().filename().string());
      check_fake_pipeline(s);
      walked.push_back(e.path().stem().string());
    }
    std::sort(walked.begin(), walked.end());
    CHECK(walked == std::vector<std::string>{"bloom-176b-tr11-g384", "narayanan21-t1-gpt145.6b-g1536",
                                             "narayanan21-t1-gpt39.1b-g512", "narayanan21-t1-gpt76.1b-g1024",
                                             "narayanan21-t2-ptd-gpt175b-g1536",
                                             "nemo-llama3-70b-h100-fp8-tp4-pp8-vp5-g64"});
  }
  SECTION("interleaved, two virtual stages") {
    check_fake_pipeline(
        load_scenario(src("scenarios/llama3.1-70b-tp8-pp2-64xh100.yaml"),
                      {{"parallelism.schedule", "interleaved_1f1b"}, {"parallelism.virtual_stages", "2"}}));
  }
  SECTION("four stages, a tied embedding all-reduced between the first and the last, gradients copied into buckets") {
    check_fake_pipeline(load_scenario(src("scenarios/gpt2-1.5b-16xh100-ib.yaml"),
                                      {{"parallelism.pipeline", "4"}, {"training.gradient_accumulation", "8"}}));
  }
}

TEST_CASE("without pipeline stages the walker marks no spans: the DDP dry run is unchanged") {
  const Scenario s = load_scenario(src("scenarios/llama3.1-8b-8xh100.yaml"));
  const StepPlan plan = make_step_plan(s);
  const StepLayout layout = make_layout(plan, dtype_bytes(s.training.param_dtype), s.ddp.gradient_as_bucket_view);
  DryRunExecutor dry;
  WalkOptions wo;
  wo.gradient_accumulation = plan.gradient_accumulation;
  walk_step(plan, layout, wo, dry);
  REQUIRE_FALSE(dry.launches().empty());
  for (const Launch& l : dry.launches()) CHECK(l.type != Launch::Type::stage_work);
}
