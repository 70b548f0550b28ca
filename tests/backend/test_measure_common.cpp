// Host-side measure logic: the memory message, GPU checks, and the measured result's JSON.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include "../source_dir.hpp"
#include "dpsim/backend/measure.hpp"
#include "dpsim/error.hpp"
#include "dpsim/load.hpp"
#include "dpsim/plan.hpp"
#include "dpsim/result.hpp"
#include "dpsim/sweep_spec.hpp"

using namespace dpsim;
using namespace dpsim::backend;

namespace {
std::string src(const std::string& rel) { return std::string(DPSIM_SOURCE_DIR) + "/" + rel; }

std::vector<MachineGpu> machine(int n, const std::string& name) {
  std::vector<MachineGpu> m;
  for (int i = 0; i < n; ++i) m.push_back({i, name, 80e9, 79.1e9});
  return m;
}
}  // namespace

TEST_CASE("memory need message names need, GPU and free memory") {
  CHECK(memory_need_message(128.5e9, "NVIDIA H100 80GB HBM3", 79.1e9) ==
        "needs 128.5 GB per GPU, this H100 has 79.1 GB free");
  CHECK(short_gpu_name("NVIDIA H200") == "H200");
  CHECK(short_gpu_name("NVIDIA A100-SXM4-40GB") == "A100");
  MemoryNeed need;
  need.model_state_bytes = 128.48e9;
  need.activation_bytes = 0.02e9;
  CHECK_THROWS_WITH(check_memory(need, "NVIDIA H100 80GB HBM3", 79.1e9),
                    Catch::Contains("needs 128.5 GB per GPU, this H100 has 79.1 GB free"));
  CHECK_NOTHROW(check_memory(need, "NVIDIA H200", 140e9));
}

TEST_CASE("the scenario's cluster must match the machine unless --gpus says otherwise") {
  const Scenario s = load_scenario(src("scenarios/llama3.1-8b-8xh100.yaml"));
  REQUIRE(s.world_size() == 8);
  const auto h100 = machine(8, "NVIDIA H100 80GB HBM3");
  const GpuSelection all = select_gpus(s, 0, h100);
  CHECK(all.count == 8);
  CHECK_FALSE(all.overridden);
  CHECK_THROWS_WITH(select_gpus(s, 0, machine(1, "NVIDIA H100 80GB HBM3")),
                    Catch::Contains("needs 8 GPU(s)") && Catch::Contains("--gpus"));
  CHECK_THROWS_WITH(select_gpus(s, 0, machine(8, "NVIDIA A100-SXM4-80GB")), Catch::Contains("A100"));
  const GpuSelection one = select_gpus(s, 1, machine(1, "NVIDIA H200"));
  CHECK(one.count == 1);
  CHECK(one.overridden);
  CHECK(one.warnings.size() == 2);  // count and model
  CHECK_THROWS_WITH(select_gpus(s, 4, machine(2, "NVIDIA H100 80GB HBM3")), Catch::Contains("more GPUs"));
  CHECK_THROWS_WITH(select_gpus(s, 0, {}), Catch::Contains("no CUDA device"));
  CHECK(same_gpu_model("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"));
  CHECK(same_gpu_model("H100-SXM", "NVIDIA H100 80GB HBM3"));
  CHECK_FALSE(same_gpu_model("NVIDIA H100 80GB HBM3", "NVIDIA H200"));
}

TEST_CASE("measured timings become a StepResult that the shared reader parses") {
  const Scenario s = load_scenario(src("scenarios/llama3.1-8b-8xh100.yaml"));
  const StepPlan plan = make_step_plan(s);
  const size_t nb = plan.buckets.size();
  std::vector<std::vector<StepSample>> samples(2);
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 5; ++i) {
      StepSample x;
      x.forward_s = 0.2;
      x.backward_s = 0.4;
      x.optimizer_s = 0.05;
      x.step_s = 0.7 + 0.01 * i + 0.001 * r;  // rank 1 is the slower one
      x.backward_end_s = 0.6;
      for (size_t b = 0; b < nb; ++b) {
        const double t = 0.2 + 0.4 * static_cast<double>(b + 1) / static_cast<double>(nb);
        x.buckets.push_back({t, t + 0.001, t + 0.002});
      }
      samples[static_cast<size_t>(r)].push_back(x);
    }
  MeasureContext ctx;
  ctx.gpu_name = "NVIDIA H100 80GB HBM3";
  ctx.gpu_count = 8;
  ctx.scenario_world_size = 8;
  ctx.driver_version = "580.159.03";
  ctx.cuda_runtime_version = "13.0";
  ctx.nccl_version = "2.28.9";
  ctx.cublas_version = "13.0.0";
  ctx.host = "test";
  ctx.git_revision = "abc";
  ctx.scenario_hash = scenario_hash(src("scenarios/llama3.1-8b-8xh100.yaml"));
  ctx.warmup = 3;
  ctx.iters = 5;
  const StepResult r = assemble_result(s, plan, ctx, samples);
  CHECK(r.mode == "measure");
  CHECK(r.step_time_s == Approx(0.721));  // median of the slowest rank
  CHECK(r.exposed_comm_s == Approx(0.071));
  CHECK(r.buckets.size() == nb);
  CHECK(r.parameters == plan.parameters);
  CHECK(r.spreads.at("step.time_s").at("p90").get<double>() == Approx(0.737));
  CHECK(ctx.scenario_hash.rfind("fnv1a64:", 0) == 0);

  const nlohmann::json j = to_json(r);
  const StepResult back = result_from_json(nlohmann::json::parse(j.dump()));
  CHECK(back.mode == "measure");
  CHECK(back.step_time_s == Approx(r.step_time_s));
  CHECK(back.buckets.size() == nb);
  CHECK(back.context.at("gpu_name") == "NVIDIA H100 80GB HBM3");
  for (const char* k : {"driver_version", "cuda_runtime_version", "nccl_version", "cublas_version", "host",
                        "git_revision", "scenario_hash"})
    CHECK(back.context.contains(k));
  CHECK_THROWS(assemble_result(s, plan, ctx, {}));
}

TEST_CASE("without pipeline stages: step.* the slowest rank's medians, no stages[], the data-parallel spreads") {
  const Scenario s = load_scenario(src("scenarios/llama3.1-8b-8xh100.yaml"));
  const StepPlan plan = make_step_plan(s);
  const size_t nb = plan.buckets.size();
  std::vector<std::vector<StepSample>> samples(8);
  for (int r = 0; r < 8; ++r)
    for (int i = 0; i < 5; ++i) {
      StepSample x;
      x.forward_s = 0.2 + 0.001 * r;  // the slowest rank (7) computes the longest
      x.backward_s = 0.4;
      x.optimizer_s = 0.05;
      x.step_s = 0.7 + 0.01 * i + 0.002 * r;
      for (size_t b = 0; b < nb; ++b) {
        const double at = 0.01 * static_cast<double>(b);
        x.buckets.push_back({0.3 + at, 0.301 + at, 0.304 + at});
      }
      samples[static_cast<size_t>(r)].push_back(x);
    }
  MeasureContext ctx;
  ctx.gpu_count = 8;
  ctx.scenario_world_size = 8;
  const StepResult r = assemble_result(s, plan, ctx, samples);
  CHECK(r.step_time_s == Approx(0.734));
  CHECK(r.forward_s == Approx(0.207));
  CHECK(r.backward_s == Approx(0.4));
  CHECK(r.optimizer_s == Approx(0.05));
  CHECK(r.exposed_comm_s == Approx(0.734 - 0.657));
  CHECK(r.comm_busy_s == Approx(0.003 * static_cast<double>(nb)));
  CHECK(r.no_overlap_step_s == Approx(0.657 + 0.003 * static_cast<double>(nb)));
  CHECK(r.samples_per_s == Approx(static_cast<double>(plan.micro_batch * plan.gradient_accumulation) * 8 / 0.734));
  CHECK(r.scaling_efficiency == Approx(0.657 / 0.734));
  CHECK(r.stages.empty());
  CHECK(r.reported_stage == 0);
  CHECK(r.tensor_comm_s == 0);
  CHECK(r.p2p_s == 0);
  CHECK(r.pipeline_bubble_s == 0);
  REQUIRE(r.buckets.size() == nb);
  CHECK(r.buckets.back().start_s == Approx(0.301 + 0.01 * static_cast<double>(nb - 1)));
  std::vector<std::string> keys;
  for (auto it = r.spreads.begin(); it != r.spreads.end(); ++it) keys.push_back(it.key());
  CHECK(keys == std::vector<std::string>{"comm_busy_s", "step.backward_s", "step.exposed_comm_s", "step.forward_s",
                                         "step.optimizer_s", "step.time_s"});
  const nlohmann::json j = to_json(r);
  CHECK_FALSE(j.contains("stages"));
  CHECK_FALSE(j.at("step").contains("reported_stage"));
  CHECK(j.at("parallelism").at("pipeline") == 1);
}

TEST_CASE("measured throughput counts data-parallel replicas: a tensor group trains one micro-batch stream") {
  const Scenario s = load_scenario(src("scenarios/llama3.1-8b-8xh100.yaml"), {{"parallelism.tensor", "4"}});
  const StepPlan plan = make_step_plan(s);
  REQUIRE(plan.dims.data == 2);
  std::vector<std::vector<StepSample>> samples(8, std::vector<StepSample>(3));
  for (auto& rank : samples)
    for (StepSample& x : rank) {
      x.step_s = 2.0;
      x.buckets.resize(plan.buckets.size());
    }
  MeasureContext ctx;
  ctx.gpu_count = 8;
  ctx.scenario_world_size = 8;
  ctx.single_allreduce_s = 0.01;
  const StepResult r = assemble_result(s, plan, ctx, samples);
  CHECK(r.samples_per_s == Approx(static_cast<double>(plan.micro_batch * plan.gradient_accumulation) * 2 / 2.0));
  // The all-gradient all-reduce ran over the data-parallel group of 2, a quarter of the gradients each: bus bandwidth
  // with nccl-tests' 2 (n - 1) / n of n = 2, not of the 8 GPUs.
  CHECK(r.nccl_busbw_GBps == Approx(static_cast<double>(plan.gradient_bytes) / 0.01 / 1e9 * 2.0 * 1 / 2));
}

TEST_CASE("scenario.collective pins NCCL_ALGO / NCCL_PROTO before the communicators, and the context records them") {
  CHECK(nccl_environment(Collective{}).empty());  // auto: NCCL chooses
  using Env = std::vector<std::pair<std::string, std::string>>;
  CHECK(nccl_environment({Algorithm::ring, Protocol::simple}) == Env{{"NCCL_ALGO", "Ring"}, {"NCCL_PROTO", "Simple"}});
  CHECK(nccl_environment({Algorithm::tree, Protocol::ll}) == Env{{"NCCL_ALGO", "Tree"}, {"NCCL_PROTO", "LL"}});
  CHECK(nccl_environment({Algorithm::nvls, Protocol::ll128}) == Env{{"NCCL_ALGO", "NVLS"}, {"NCCL_PROTO", "LL128"}});
  // CollNet: NCCL runs it only with NCCL_COLLNET_ENABLE=1, set for a forced collnet_chain and for collective.collnet
  CHECK(nccl_environment({Algorithm::collnet_chain, Protocol::simple}) ==
        Env{{"NCCL_ALGO", "CollnetChain"}, {"NCCL_COLLNET_ENABLE", "1"}, {"NCCL_PROTO", "Simple"}});
  Collective collnet;
  collnet.collnet = true;
  CHECK(nccl_environment(collnet) == Env{{"NCCL_COLLNET_ENABLE", "1"}});

  unsetenv("NCCL_ALGO");
  setenv("NCCL_PROTO", "LL", 1);
  std::vector<std::string> notes;
  const Env used = apply_nccl_environment({Algorithm::tree, Protocol::automatic}, notes);
  CHECK(std::string(std::getenv("NCCL_ALGO")) == "Tree");
  CHECK(used == Env{{"NCCL_ALGO", "Tree"}, {"NCCL_PROTO", "LL"}});  // the user's own NCCL_PROTO stays
  CHECK(notes.empty());
  apply_nccl_environment({Algorithm::ring, Protocol::automatic}, notes);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] == "NCCL_ALGO=Tree from the environment replaced by the scenario's collective: Ring");
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
  CHECK(apply_nccl_environment(Collective{}, notes) ==
        Env{{"NCCL_ALGO", "NCCL's choice"}, {"NCCL_PROTO", "NCCL's choice"}});

  MeasureContext c;
  c.nccl_env = used;
  c.cuda_architectures = "90-real 90-virtual";
  const auto j = context_json(c);
  CHECK(j.at("NCCL_ALGO") == "Tree");
  CHECK(j.at("cuda_architectures") == "90-real 90-virtual");
}

// --gpus N: the scenario on one node of N GPUs, its data-parallel degree the rest; the plan is the run's own (groups,
// shards, buckets, throughput), so a 1-GPU run of an FSDP scenario holds the whole model, as one GPU would.
TEST_CASE("scenario_on_gpus runs the scenario's step on N GPUs: data degree, shards and refusals") {
  const std::string ddp_file = src("scenarios/gpt2-124m-4xrtx4090.yaml");
  const Scenario ddp = load_scenario(ddp_file);
  CHECK(scenario_on_gpus(ddp_file, ddp, 4).world_size() == 4);
  const StepPlan one = make_step_plan(scenario_on_gpus(ddp_file, ddp, 1));
  CHECK(one.world_size == 1);
  CHECK(one.dims.data == 1);
  CHECK(one.buckets.size() == make_step_plan(ddp).buckets.size());  // the same gradients, bucketed the same

  const std::string fsdp_file = src("scenarios/llama3.1-8b-fsdp-8xh100.yaml");
  const Scenario fsdp = load_scenario(fsdp_file);
  const StepPlan eight = make_step_plan(fsdp), two = make_step_plan(scenario_on_gpus(fsdp_file, fsdp, 2));
  CHECK(eight.sharded.shards == 8);
  CHECK(two.sharded.shards == 2);
  CHECK(two.memory.model_state_bytes > eight.memory.model_state_bytes);

  const std::string pp_file = src("scenarios/llama3.1-70b-tp8-pp2-64xh100.yaml");
  const Scenario pp = load_scenario(pp_file);
  const StepPlan sixteen = make_step_plan(scenario_on_gpus(pp_file, pp, 16));
  CHECK(sixteen.dims.data == 1);
  CHECK(sixteen.dims.tensor == 8);
  CHECK(sixteen.dims.pipeline == 2);
  CHECK_THROWS_WITH(
      scenario_on_gpus(pp_file, pp, 8),
      Catch::Contains("--gpus 8: the scenario's tensor x pipeline degrees (8 x 2) need a multiple of 16"));
  const std::string hsdp_file = src("scenarios/llama3.1-70b-hsdp-64xh100.yaml");
  CHECK_THROWS_WITH(scenario_on_gpus(hsdp_file, load_scenario(hsdp_file), 2),
                    Catch::Contains("--gpus 2 (one node of 2 GPUs):") && Catch::Contains("parallelism.shard_group"));
}
