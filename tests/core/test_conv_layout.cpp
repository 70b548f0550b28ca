// training.memory_format (issue 15): a layer list's convolutions on tensor cores in channels_first (NCHW, PyTorch's
// default) run on transposed NHWC copies, each cuDNN call transposing one input-sized and one output-sized feature map
// (data/gpus.yaml kernels.nchw_convolution_transposes); channels_last, and CUDA-core fp32 convolutions, do not.
#include <catch2/catch.hpp>
#include <string>

#include "../source_dir.hpp"
#include "dpsim/estimate.hpp"
#include "dpsim/load.hpp"
#include "dpsim/plan.hpp"
#include "dpsim/sweep_spec.hpp"

using namespace dpsim;

namespace {
std::string src(const std::string& rel) { return std::string(DPSIM_SOURCE_DIR) + "/" + rel; }
// ResNet-50, 32 images per GPU, on one A100 (it has TF32).
Scenario resnet(const std::string& param, const std::string& format, bool tf32 = false) {
  return load_scenario(src("scenarios/resnet50-8xv100.yaml"), {{"training.param_dtype", param},
                                                               {"training.grad_dtype", param},
                                                               {"training.memory_format", format},
                                                               {"training.tf32", tf32 ? "true" : "false"},
                                                               {"cluster.topology", "a100-8x-nvswitch"},
                                                               {"cluster.gpus_per_node", "1"}});
}
const PlanOp* find_op(const StepPlan& p, const std::string& name) {
  for (const PlanOp& op : p.ops)
    if (op.name == name) return &op;
  return nullptr;
}
int transposes(const StepPlan& p) {
  int n = 0;
  for (const PlanOp& op : p.ops) n += op.name.find(".nchw_transposes") != std::string::npos ? 1 : 0;
  return n;
}
double step_s(const Scenario& s) { return estimate(s, make_step_plan(s)).perfect_overlap_step_s; }
}  // namespace

TEST_CASE("channels_first: each tensor-core convolution's cuDNN calls transpose its feature maps") {
  const StepPlan p = make_step_plan(resnet("fp16", "channels_first"));
  CHECK(transposes(p) == 53);  // ResNet-50's 53 convolutions; not its fc
  CHECK(find_op(p, "fc.nchw_transposes") == nullptr);
  // layer1.0.conv2: 401,408 input + output elements per image, 2 bytes, 32 images; 2 passes (read + write of each
  // transposed map) per call: the forward call, then the input- and weight-gradient calls.
  const PlanOp* t = find_op(p, "layer1.0.conv2.nchw_transposes");
  REQUIRE(t != nullptr);
  CHECK(t->kind == OpKind::elementwise);
  const double maps = 401408.0 * 2 * 32;
  CHECK(t->forward_bytes == Approx(2 * maps));
  CHECK(t->backward_bytes == Approx(2 * 2 * maps));
  // It follows its convolution.
  for (size_t i = 1; i < p.ops.size(); ++i)
    if (p.ops[i].name == "layer1.0.conv2.nchw_transposes") CHECK(p.ops[i - 1].name == "layer1.0.conv2");
}

TEST_CASE("channels_last, and fp32 on CUDA cores, run the convolutions as they are") {
  CHECK(transposes(make_step_plan(resnet("fp16", "channels_last"))) == 0);
  CHECK(transposes(make_step_plan(resnet("fp32", "channels_first"))) == 0);
  CHECK(transposes(make_step_plan(resnet("fp32", "channels_first", true))) == 53);  // TF32: tensor cores
  CHECK(step_s(resnet("fp32", "channels_first")) == Approx(step_s(resnet("fp32", "channels_last"))));
}

TEST_CASE("channels_last is faster than channels_first on tensor cores, by the transposes' bytes") {
  const Scenario first = resnet("fp16", "channels_first"), last = resnet("fp16", "channels_last");
  const double slower = step_s(first) / step_s(last);
  CHECK(slower > 1.2);  // ResNet-50's convolutions move half its memory-bound bytes (models/resnet-50.yaml)
  CHECK(slower < 1.6);
  // The aliases DeepLearningExamples' --memory-format uses.
  CHECK(resnet("fp16", "nhwc").training.memory_format == MemoryFormat::channels_last);
  CHECK(resnet("fp16", "nchw").training.memory_format == MemoryFormat::channels_first);
}
