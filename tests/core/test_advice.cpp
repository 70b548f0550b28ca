// The compute- vs communication-bound threshold: one constant (kCommBoundShare), the one docs/guide.md states.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <utility>

#include "../source_dir.hpp"
#include "dpsim/advice.hpp"
#include "dpsim/estimate.hpp"
#include "dpsim/load.hpp"
#include "dpsim/sweep_spec.hpp"
#include "dpsim/units.hpp"

using namespace dpsim;

namespace {

std::string src(const std::string& rel) { return std::string(DPSIM_SOURCE_DIR) + "/" + rel; }

StepResult evaluate(const Scenario& s) { return estimate(s, make_step_plan(s)).result; }
const Evaluate with_plan = [](const Scenario& s, const StepPlan& p) { return estimate(s, p).result; };

// The first advice sentence for `r` with its exposed communication set to `share` of the step.
std::string verdict(const Scenario& s, StepResult r, double share) {
  r.exposed_comm_s = share * r.step_time_s;
  return advise(s, r, with_plan).at(0);
}

}  // namespace

TEST_CASE("docs/guide.md states the threshold the advice uses") {
  std::ifstream in(src("docs/guide.md"));
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  std::string guide = text.str();
  for (char& c : guide)
    if (c == '\n') c = ' ';
  std::smatch m;
  const std::regex sentence(R"(exposed communication is more than\s+([0-9.]+)% of the\s+step)");
  REQUIRE(std::regex_search(guide, m, sentence));
  CHECK(std::stod(m[1].str()) == Approx(100.0 * kCommBoundShare));
}

TEST_CASE("the advice turns to the network just above the threshold, not below it") {
  const Scenario s = load_scenario(src("scenarios/gpt2-1.5b-16xh100-ib.yaml"));
  const StepResult r = evaluate(s);
  CHECK_THAT(verdict(s, r, kCommBoundShare * 0.99), Catch::StartsWith("Compute-bound"));
  CHECK_THAT(verdict(s, r, kCommBoundShare * 1.01), Catch::StartsWith("Communication-bound"));
}

TEST_CASE("estimate's advice names its figures as the perfect-overlap bound, beside the no-overlap bound") {
  const Scenario s = load_scenario(src("scenarios/gpt2-1.5b-16xh100-ib.yaml"));
  const StepResult r = evaluate(s);
  REQUIRE(r.bounds);
  const std::string first = advise(s, r, with_plan).at(0);
  CHECK_THAT(first, Catch::Contains("perfect-overlap bound") && Catch::Contains("with no overlap"));
}

TEST_CASE("when even zero3 does not fit, the advice says by how much and the smallest cluster that fits") {
  Scenario s = load_scenario(src("scenarios/llama3.1-70b-64xh100-ib.yaml"), {{"cluster.nodes", "1"}});
  const StepResult r = evaluate(s);
  REQUIRE_FALSE(r.fits);
  const std::string text = advise(s, r, with_plan).at(0);
  // zero3 on 8 GPUs, and its shortfall, from the memory model itself.
  Scenario z = s;
  z.parallelism.sharding = Sharding::zero3;
  StepResult z3;
  fill_common(z, make_step_plan(z), z3);
  CHECK(text.find("None fits: zero3 is short by " + format_bytes(z3.memory_need_bytes() - z3.gpu_memory_bytes)) !=
        std::string::npos);
  // Its activations alone exceed an H100, so more GPUs help only with full recomputation: from 4 nodes, not 2.
  CHECK(z3.activation_bytes_per_gpu > z3.gpu_memory_bytes);
  CHECK(text.find("zero3 with full checkpointing fits from 4 nodes (32 GPUs).") != std::string::npos);
  z.training.activation_checkpointing = ActivationCheckpointing::full;
  for (const auto& [nodes, fits] : {std::pair{2, false}, std::pair{4, true}}) {
    z.topology.nodes = nodes;
    StepResult m;
    fill_common(z, make_step_plan(z), m);
    CHECK(m.fits == fits);
  }
}

TEST_CASE("when nothing fits on a single-node topology without NICs, the advice says so instead of failing") {
  // The same 70B model on one 8x H100 NVSwitch box: doubling the nodes is not a cluster dpsim can route (no NICs),
  // which the advice used to price anyway (an all-reduce over zero network bandwidth: "not available").
  Scenario s = load_scenario(src("scenarios/llama3.1-70b-64xh100-ib.yaml"),
                             {{"cluster.topology", "h100-8x-nvswitch"}, {"cluster.nodes", "1"}});
  const StepResult r = evaluate(s);
  REQUIRE_FALSE(r.fits);
  const std::string text = advise(s, r, with_plan).at(0);
  CHECK(text.find("None fits: zero3 is short by") != std::string::npos);
  CHECK(text.find("is one node with no NICs: more GPUs need a multi-node topology") != std::string::npos);
}

TEST_CASE("tensor parallelism's collectives above the threshold make the step tensor-communication-bound") {
  const Scenario s = load_scenario(src("scenarios/megatron-8.3b-8xv100-tp8.yaml"));
  StepResult r = evaluate(s);
  REQUIRE(r.tensor_parallel == 8);
  r.tensor_comm_s = kCommBoundShare * 0.99 * r.step_time_s;
  const std::string below = advise(s, r, with_plan).at(0);
  CHECK_THAT(below, Catch::StartsWith("Compute-bound") && Catch::Contains("tensor-parallel communication 9.9%"));
  r.tensor_comm_s = kCommBoundShare * 1.01 * r.step_time_s;
  CHECK_THAT(advise(s, r, with_plan).at(0), Catch::StartsWith("Tensor-communication-bound"));
}

TEST_CASE("tensor-communication advice: smaller degrees by their memory, sequence parallelism by its activations") {
  const Scenario s = load_scenario(src("scenarios/megatron-8.3b-8xv100-tp8.yaml"));
  const StepResult r = evaluate(s);
  REQUIRE(r.tensor_comm_s > kCommBoundShare * r.step_time_s);  // 8.3B over 8 V100s: Megatron's f and g cost ~19%
  const auto advice = advise(s, r, with_plan);
  REQUIRE(advice.size() >= 3);
  const std::string& first = advice.at(0);
  CHECK_THAT(first, Catch::StartsWith("Tensor-communication-bound"));
  // 8.3B's model state alone is 16 B x 2.1e9 per GPU at tensor 4: no smaller degree fits a 32 GiB V100.
  for (int t : {4, 2, 1}) {
    Scenario v = s;
    v.parallelism.tensor = t;
    StepResult m;
    fill_common(v, make_step_plan(v), m);
    CHECK_FALSE(m.fits);
    CHECK_THAT(first, Catch::Contains(fmt::format("parallelism.tensor {} (data {}): {} per GPU, does not fit", t, 8 / t,
                                                  format_bytes(m.memory_need_bytes()))));
  }
  CHECK_THAT(first, Catch::EndsWith("No smaller degree fits with more throughput: tensor 8 stays."));
  // Sequence parallelism: the same bytes, fewer activations (the variant's own memory figure).
  Scenario sp = s;
  sp.parallelism.sequence_parallel = true;
  StepResult m;
  fill_common(sp, make_step_plan(sp), m);
  REQUIRE(m.activation_bytes_per_gpu < r.activation_bytes_per_gpu);
  CHECK_THAT(advice.at(2), Catch::StartsWith("parallelism.sequence_parallel: true does not cut these bytes") &&
                               Catch::Contains("from " + format_bytes(r.activation_bytes_per_gpu) + " to " +
                                               format_bytes(m.activation_bytes_per_gpu)));
  // The 2019 code blocks on every call; Megatron-Core's asynchronous backward calls are offered, with their gain.
  Scenario async = s;
  async.parallelism.tp_comm_overlap = TpCommOverlap::backward;
  const StepResult a = evaluate(async);
  REQUIRE(a.samples_per_s > r.samples_per_s);
  CHECK_THAT(advice.at(1), Catch::StartsWith("parallelism.tp_comm_overlap: backward (Megatron-Core's") &&
                               Catch::Contains(fmt::format("-> {:.1f} samples/s", a.samples_per_s)));
  // A scenario that runs them so is not offered them again.
  for (const std::string& line : advise(async, a, with_plan))
    CHECK_THAT(line, !Catch::StartsWith("parallelism.tp_comm_overlap: backward"));
}

TEST_CASE("tensor-communication advice names the smaller degree that fits with the highest throughput") {
  // The 1.2B model fits one V100: on 8 GPUs with tensor 8, every smaller degree fits and data parallelism is faster.
  const Scenario s = load_scenario(src("scenarios/megatron-1.2b-1xv100.yaml"),
                                   {{"cluster.gpus_per_node", "8"}, {"parallelism.tensor", "8"}});
  const StepResult r = evaluate(s);
  REQUIRE(r.tensor_comm_s > kCommBoundShare * r.step_time_s);
  int best = 0;
  double best_rate = r.samples_per_s;
  for (int t : {4, 2, 1}) {
    Scenario v = s;
    v.parallelism.tensor = t;
    const StepResult x = evaluate(v);
    REQUIRE(x.fits);
    if (x.samples_per_s > best_rate) {
      best = t;
      best_rate = x.samples_per_s;
    }
  }
  REQUIRE(best > 0);
  CHECK_THAT(advise(s, r, with_plan).at(0),
             Catch::EndsWith(fmt::format("Fastest that fits: parallelism.tensor: {}.", best)));
}

TEST_CASE("a transformer on eager elementwise kernels gets what fused kernels would gain; a fused one does not") {
  const auto lines = [](const std::string& file, const std::string& elementwise) {
    const Scenario s = load_scenario(src(file), {{"training.elementwise", elementwise}});
    return advise(s, evaluate(s), with_plan);
  };
  const auto mentions = [](const std::vector<std::string>& advice) {
    for (const auto& line : advice)
      if (line.rfind("Eager elementwise kernels", 0) == 0) return line;
    return std::string();
  };
  const std::string eager = mentions(lines("scenarios/llama3.1-8b-fsdp-8xh100.yaml", "eager"));
  REQUIRE_FALSE(eager.empty());
  // The gain is the fused scenario's own throughput over this one's.
  Scenario fused = load_scenario(src("scenarios/llama3.1-8b-fsdp-8xh100.yaml"), {{"training.elementwise", "fused"}});
  const StepResult base = evaluate(load_scenario(src("scenarios/llama3.1-8b-fsdp-8xh100.yaml")));
  const StepResult f = evaluate(fused);
  CHECK(f.samples_per_s > base.samples_per_s * (1 + kWorthMentioningGain));
  CHECK(eager.find(fmt::format("({:.1f} -> {:.1f} samples/s)", base.samples_per_s, f.samples_per_s)) !=
        std::string::npos);
  CHECK(mentions(lines("scenarios/llama3.1-8b-fsdp-8xh100.yaml", "fused")).empty());
  // GPT-2: PyTorch's LayerNorm and GELU kernels (data/gpus.yaml kernels.native_kernel_time_factor), said as such.
  const std::string gpt2 = mentions(lines("scenarios/gpt2-1.5b-16xh100-ib.yaml", "eager"));
  CHECK(gpt2.find("PyTorch's own LayerNorm and GELU") != std::string::npos);
  CHECK(gpt2.find("RMSNorm") == std::string::npos);
  CHECK(mentions(lines("scenarios/gpt2-1.5b-16xh100-ib.yaml", "fused")).empty());
}

TEST_CASE("a SHARP network's CollNet left off gets what NCCL_COLLNET_ENABLE gives; channels_first convolutions too") {
  const auto advice_of = [](const std::string& file, const std::vector<Override>& overrides) {
    const Scenario s = load_scenario(src(file), overrides);
    return advise(s, evaluate(s), with_plan);
  };
  const auto starting = [](const std::vector<std::string>& advice, const std::string& start) {
    for (const auto& line : advice)
      if (line.rfind(start, 0) == 0) return line;
    return std::string();
  };
  // GPT-2 124M, one sequence per GPU on 64 H100 nodes with SHARP: communication-bound, CollNetChain helps.
  const std::vector<Override> sharp{
      {"cluster.topology", "h100-ib-sharp"}, {"cluster.nodes", "64"}, {"training.micro_batch", "1"}};
  const std::string off = starting(advice_of("scenarios/gpt2-124m-4xrtx4090.yaml", sharp), "The network reduces");
  REQUIRE_FALSE(off.empty());
  CHECK(off.find("collective.collnet: true") != std::string::npos);
  std::vector<Override> on = sharp;
  on.push_back({"collective.collnet", "true"});
  CHECK(starting(advice_of("scenarios/gpt2-124m-4xrtx4090.yaml", on), "The network reduces").empty());
  // The same without SHARP: nothing to say.
  std::vector<Override> plain = sharp;
  plain[0].value = "h100-ib-cluster";
  CHECK(starting(advice_of("scenarios/gpt2-124m-4xrtx4090.yaml", plain), "The network reduces").empty());
  // ResNet-50 in fp16 (tensor cores) and PyTorch's default layout: channels_last's gain; in channels_last, none.
  const std::vector<Override> fp16{{"training.param_dtype", "fp16"}, {"training.grad_dtype", "fp16"}};
  const std::string nchw =
      starting(advice_of("scenarios/resnet50-8xv100.yaml", fp16), "Convolutions in channels_first");
  REQUIRE_FALSE(nchw.empty());
  CHECK(nchw.find("training.memory_format: channels_last") != std::string::npos);
  std::vector<Override> nhwc = fp16;
  nhwc.push_back({"training.memory_format", "channels_last"});
  CHECK(starting(advice_of("scenarios/resnet50-8xv100.yaml", nhwc), "Convolutions in channels_first").empty());
}

TEST_CASE("plain DDP on 2-3 nodes gets what a forced tree gives where its double tree beats NCCL's ring") {
  const auto advice_of = [](const std::vector<Override>& overrides) {
    const Scenario s = load_scenario(src("scenarios/gpt2-1.5b-64xa100-hdr.yaml"), overrides);
    for (const auto& line : advise(s, evaluate(s), with_plan))
      if (line.rfind("NCCL's own model prices its tree", 0) == 0) return line;
    return std::string();
  };
  // GPT-2 1.5B, one 512-token sequence per GPU, 200 MiB buckets, on 3 GB200 partitions of 4 (no NVLS with 4 GPUs):
  // communication-bound on the network; the tree sends 1.5 S per node, the ring 1.83 S.
  const std::vector<Override> three{{"cluster.topology", "gb200-nvl72"}, {"cluster.nodes", "3"},
                                    {"cluster.gpus_per_node", "4"},      {"training.micro_batch", "1"},
                                    {"training.sequence_length", "512"}, {"ddp.bucket_cap", "200MiB"}};
  const std::string line = advice_of(three);
  REQUIRE_FALSE(line.empty());
  CHECK(line.find("1.5 S per node where the ring sends 1.83 S") != std::string::npos);
  CHECK(line.find("collective.algorithm: tree") != std::string::npos);
  // Already forced, or on 4 nodes (2 S per node, more than the ring's): nothing to say.
  std::vector<Override> forced = three;
  forced.push_back({"collective.algorithm", "tree"});
  CHECK(advice_of(forced).empty());
  std::vector<Override> four = three;
  four[1].value = "4";
  CHECK(advice_of(four).empty());
}

TEST_CASE("late reduction (Megatron's local DDP) gets what overlapping the buckets during the backward gives") {
  const auto advice_of = [](const std::vector<Override>& overrides) {
    // GPT-2 1.5B, four 512-token sequences per GPU on 8 A100 nodes over HDR, one bucket after the backward:
    // communication-bound, with a backward long enough to hide most of the all-reduce.
    std::vector<Override> all{{"training.micro_batch", "4"}, {"training.sequence_length", "512"}};
    all.insert(all.end(), overrides.begin(), overrides.end());
    const Scenario s = load_scenario(src("scenarios/gpt2-1.5b-64xa100-hdr.yaml"), all);
    return advise(s, evaluate(s), with_plan);
  };
  const auto line_starting = [](const std::vector<std::string>& lines, const std::string& start) {
    for (const auto& line : lines)
      if (line.rfind(start, 0) == 0) return line;
    return std::string();
  };
  const std::vector<std::string> late =
      advice_of({{"ddp.overlap_grad_reduce", "false"}, {"ddp.bucket_cap", "1TiB"}, {"ddp.first_bucket", "1TiB"}});
  REQUIRE_THAT(late.at(0), Catch::StartsWith("Communication-bound"));
  const std::string overlap = line_starting(late, "ddp.overlap_grad_reduce false -> true");
  REQUIRE_FALSE(overlap.empty());
  CHECK(overlap.find("PyTorch DDP's 26.21 MB buckets): +") != std::string::npos);  // a gain, 25 MiB buckets
  // Overlapped already: not offered again.
  const std::vector<std::string> overlapped = advice_of({});
  CHECK(line_starting(overlapped, "ddp.overlap_grad_reduce").empty());
}

TEST_CASE("a mixed-precision run that does not fit gets what pure 16-bit training would hold, where that fits") {
  const auto memory_line = [](const std::vector<Override>& overrides) {
    const Scenario s = load_scenario(src("scenarios/llama3.1-8b-8xh100.yaml"), overrides);
    return advise(s, evaluate(s), with_plan).at(0);
  };
  // Llama 3.1 8B under DDP on 80 GB: 16 B per parameter does not fit, 8 does (64.2 GB of model state).
  const std::string mixed = memory_line({});
  REQUIRE_THAT(mixed, Catch::StartsWith("Does not fit"));
  CHECK_THAT(mixed, Catch::Contains("Pure bf16 training (training.master_weights: false: the optimizer's moments in "
                                    "bf16, no fp32 master copy, as torchtune's bf16 recipes train): model state "
                                    "64.24 GB per GPU"));
  // Already pure: not offered again (and it fits: no memory line at all).
  CHECK_THAT(memory_line({{"training.master_weights", "false"}}), !Catch::Contains("Pure bf16"));
  // Where even pure bf16 does not fit (8k tokens x 4 per GPU), nothing is offered.
  CHECK_THAT(memory_line({{"training.micro_batch", "4"}}), !Catch::Contains("Pure bf16"));
}

TEST_CASE("a long sequence whose activations do not fit gets the smallest context-parallel degree that fits") {
  const auto memory_line = [](const std::vector<Override>& overrides) {
    const Scenario s = load_scenario(src("scenarios/llama3.1-8b-128k-tp4-cp8-pp2-64xh100.yaml"), overrides);
    return advise(s, evaluate(s), with_plan).at(0);
  };
  // 128k tokens on one GPU's share of tensor 4: 155 GB of activations; a quarter of them fits
  const std::string one = memory_line({{"parallelism.context", "1"}});
  REQUIRE_THAT(one, Catch::StartsWith("Does not fit"));
  CHECK_THAT(one, Catch::Contains("Context parallelism (parallelism.context: 4, data 2: each GPU holds 1/4 of every "
                                  "sequence, 32768 tokens): activations 38.65 GB per GPU"));
  // Eager attention cannot run the ring: not offered
  CHECK_THAT(memory_line({{"parallelism.context", "1"}, {"training.attention", "eager_16bit"}}),
             !Catch::Contains("Context parallelism"));
}

TEST_CASE("with pipeline stages the advice offers only the sharding the loader accepts there (zero1, full_shard)") {
  const Scenario s =
      load_scenario(src("scenarios/llama3.1-8b-128k-tp4-cp8-pp2-64xh100.yaml"), {{"parallelism.context", "1"}});
  const std::string line = advise(s, evaluate(s), with_plan).at(0);
  REQUIRE_THAT(line, Catch::StartsWith("Does not fit"));
  CHECK_THAT(line, Catch::Contains("zero3:"));
  CHECK_THAT(line, !Catch::Contains("zero2:"));  // shard_grad_op with pipeline stages: refused by the loader
  // The loader refuses what the advice leaves out
  CHECK_THROWS_WITH(
      load_scenario(src("scenarios/llama3.1-8b-128k-tp4-cp8-pp2-64xh100.yaml"), {{"parallelism.sharding", "zero2"}}),
      Catch::Contains("zero2 with pipeline parallelism is not modelled yet"));
}
