// dpsim inspect model FILE: parameter count by tensor, with totals. (inspect topology, inspect gpus: cmd_inspect_*.cpp)
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "dpsim/load.hpp"
#include "dpsim/model.hpp"
#include "dpsim/units.hpp"
#include "tables.hpp"

namespace dpsim::app {

void register_inspect(CLI::App& app) {
  auto* inspect = app.add_subcommand("inspect", "Show what dpsim reads from a file");
  inspect->require_subcommand(1);
  auto* model_cmd = inspect->add_subcommand("model", "Parameter count of a model, by tensor");
  auto file = std::make_shared<std::string>();
  auto json_out = std::make_shared<bool>(false);
  auto sequence = std::make_shared<int64_t>(1);
  model_cmd->add_option("MODEL", *file, "models/*.yaml, or a Hugging Face config.json")->required();
  model_cmd->add_flag("--json", *json_out,
                      "Print JSON: {name, parameters, tensors: [{name, parameters}], ops: [{name, kind, "
                      "forward_flops_per_sample}]}");
  model_cmd->add_option("--sequence-length", *sequence, "Tokens per sample for the ops' FLOPs (default 1)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  model_cmd->callback([file, json_out, sequence] {
    const ModelSpec model = load_model(*file);
    const auto groups = parameter_breakdown(model);
    int64_t total = 0;
    for (const auto& g : groups) total += g.parameters;
    if (*json_out) {
      nlohmann::json j{{"name", model.name}, {"parameters", total}, {"tensors", nlohmann::json::array()}};
      for (const auto& g : groups) j["tensors"].push_back({{"name", g.name}, {"parameters", g.parameters}});
      j["ops"] = nlohmann::json::array();
      for (const Op& op : build_ops(model, *sequence, Dtype::bf16))
        j["ops"].push_back({{"name", op.name},
                            {"kind", to_string(op.kind)},
                            {"forward_flops_per_sample", op.forward_flops_per_sample}});
      emit(j.dump(2) + "\n", "");
      return;
    }
    std::vector<std::vector<std::string>> rows{{"tensor", "parameters", "share"}};
    for (const auto& g : groups) {
      rows.push_back({g.name, format_count(static_cast<double>(g.parameters)),
                      fmt::format("{:.3f}%", 100.0 * static_cast<double>(g.parameters) / static_cast<double>(total))});
    }
    rows.push_back({"total", format_count(static_cast<double>(total)), "100%"});
    emit(fmt::format("{} ({})\n", model.name, model.file) + render_table(rows), "");
  });
  register_inspect_topology(*inspect);
  register_inspect_gpus(*inspect);
  register_inspect_ops(*inspect);
}

}  // namespace dpsim::app
