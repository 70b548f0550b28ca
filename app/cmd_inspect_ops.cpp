// dpsim inspect ops SCENARIO: the compute model op by op, as predict, estimate and the dry run cost it: each op's
// forward and backward time for one micro-batch on one GPU, its FLOPs and bytes, and the totals per kind, so that a
// per-kernel profile of the same model (validation/device/torch-llama-probe.py) can be set beside it.
#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "commands.hpp"
#include "dpsim/compute_cost.hpp"
#include "dpsim/plan.hpp"
#include "set_option.hpp"
#include "tables.hpp"

namespace dpsim::app {

namespace {

struct OpsArgs {
  std::string scenario;
  std::vector<std::string> sets;
  bool all = false;
  bool json = false;
  std::string output;
};

// Ops of a repeated block other than the first (the first numbered path component: "layers.3.mlp.up_proj",
// "h.11.attn.c_attn"): shown only with --all.
bool later_block(const std::string& name) {
  static const std::regex block(R"(\.([0-9]+)\.)");
  std::smatch m;
  return std::regex_search(name, m, block) && m[1] != "0";
}

std::string ms(double s) { return fmt::format("{:.3f}", s * 1e3); }
std::string giga(double x) { return x > 0 ? fmt::format("{:.2f}", x / 1e9) : "-"; }

struct KindTotal {
  int ops = 0;
  double forward_s = 0, backward_s = 0;
};

nlohmann::json to_json(const StepPlan& plan, const OpSeconds& t, const std::map<std::string, KindTotal>& kinds) {
  nlohmann::json ops = nlohmann::json::array();
  for (size_t i = 0; i < plan.ops.size(); ++i) {
    const PlanOp& op = plan.ops[i];
    ops.push_back({{"name", op.name},
                   {"kind", to_string(op.kind)},
                   {"forward_s", t.forward[i]},
                   {"backward_s", t.backward[i]},
                   {"forward_flops", op.forward_flops},
                   {"backward_flops", op.backward_flops},
                   {"forward_bytes", op.forward_bytes},
                   {"backward_bytes", op.backward_bytes},
                   {"bias_grad_bytes", op.bias_grad_bytes},
                   {"recompute_forward", op.recompute_forward}});
  }
  nlohmann::json totals = nlohmann::json::object();
  for (const auto& [kind, k] : kinds)
    totals[kind] = {{"ops", k.ops}, {"forward_s", k.forward_s}, {"backward_s", k.backward_s}};
  nlohmann::json out = {{"scenario", plan.scenario},
                        {"micro_batch", plan.micro_batch},
                        {"sequence_length", plan.sequence_length},
                        {"ops", ops},
                        {"totals_by_kind", totals}};
  if (plan.dims.context > 1) out["context"] = plan.dims.context;  // each op on sequence_length / context tokens
  return out;
}

std::string to_text(const Scenario& s, const StepPlan& plan, const OpSeconds& t,
                    const std::map<std::string, KindTotal>& kinds, bool all) {
  std::vector<std::vector<std::string>> rows{
      {"op", "kind", "forward ms", "backward ms", "fwd TFLOP", "bwd TFLOP", "fwd GB", "bwd GB", "recompute"}};
  size_t hidden = 0;
  for (size_t i = 0; i < plan.ops.size(); ++i) {
    const PlanOp& op = plan.ops[i];
    if (!all && later_block(op.name)) {
      ++hidden;
      continue;
    }
    rows.push_back({op.name, to_string(op.kind), ms(t.forward[i]), ms(t.backward[i]),
                    fmt::format("{:.3f}", op.forward_flops / 1e12), fmt::format("{:.3f}", op.backward_flops / 1e12),
                    giga(op.forward_bytes), giga(op.backward_bytes + (op.weight_grad ? op.bias_grad_bytes : 0.0)),
                    op.recompute_forward ? "yes" : ""});
  }
  std::string out = fmt::format(
      "{}: compute of one micro-batch ({} x {} tokens{}) on one {} GPU, op by op (backward ms includes the forward "
      "that activation checkpointing reruns where recompute says yes; GB = 1e9 bytes)\n",
      plan.scenario, plan.micro_batch, plan.sequence_length,
      plan.dims.context > 1 ? fmt::format(", {} of them on this GPU: context parallelism over {}",
                                          plan.sequence_length / plan.dims.context, plan.dims.context)
                            : "",
      s.topology.gpu.key);
  out += render_table(rows);
  if (hidden > 0) out += fmt::format("({} ops of later blocks not shown: --all lists them)\n", hidden);
  std::vector<std::vector<std::string>> sums{{"kind", "ops", "forward ms", "backward ms", "share"}};
  double total = 0;
  for (const auto& [kind, k] : kinds) total += k.forward_s + k.backward_s;
  for (const auto& [kind, k] : kinds) {
    sums.push_back({kind, std::to_string(k.ops), ms(k.forward_s), ms(k.backward_s),
                    fmt::format("{:.1f}%", total > 0 ? 100 * (k.forward_s + k.backward_s) / total : 0.0)});
  }
  return out + "Whole model, per kind:\n" + render_table(sums);
}

}  // namespace

void register_inspect_ops(CLI::App& inspect) {
  auto args = std::make_shared<OpsArgs>();
  auto* cmd = inspect.add_subcommand(
      "ops", "The compute model op by op: forward/backward time, FLOPs and bytes of one micro-batch on one GPU");
  cmd->add_option("SCENARIO", args->scenario, "Scenario YAML file (scenarios/*.yaml)")->required();
  cmd->add_flag("--all", args->all,
                "List the ops of every block (default: the first block and the ops outside blocks)");
  cmd->add_flag("--json", args->json,
                "Print JSON: {scenario, micro_batch, sequence_length, ops: [{name, kind, forward_s, backward_s, "
                "forward_flops, backward_flops, forward_bytes, backward_bytes, bias_grad_bytes, recompute_forward}], "
                "totals_by_kind, context (with context parallelism)}");
  cmd->add_option("-o,--output", args->output, "Write to this file (atomically) instead of stdout");
  add_set_option(cmd, args->sets);
  cmd->callback([args] {
    const Scenario s = load_scenario_set(args->scenario, parse_sets(args->sets));
    const StepPlan plan = make_step_plan(s);
    const OpSeconds t = op_seconds(plan.ops, compute_model(s));
    std::map<std::string, KindTotal> kinds;
    for (size_t i = 0; i < plan.ops.size(); ++i) {
      KindTotal& k = kinds[to_string(plan.ops[i].kind)];
      ++k.ops;
      k.forward_s += t.forward[i];
      k.backward_s += t.backward[i];
    }
    emit(args->json ? to_json(plan, t, kinds).dump(2) + "\n" : to_text(s, plan, t, kinds, args->all), args->output);
  });
}

}  // namespace dpsim::app
