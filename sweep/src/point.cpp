// One sweep point: load the base scenario with the point's overrides, predict or estimate, and
// render the JSON line and the CSV row.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dpsim/estimate.hpp"
#include "dpsim/input_file.hpp"
#include "dpsim/sim/simulate.hpp"
#include "dpsim/sweep/runner.hpp"

namespace dpsim {

using nlohmann::json;

namespace {

// (column, JSON pointer into the result) for the CSV.
const std::vector<std::pair<const char*, const char*>> kFigures = {
    {"world_size", "/context/world_size"},
    {"step_time_s", "/step/time_s"},
    {"forward_s", "/step/forward_s"},
    {"backward_s", "/step/backward_s"},
    {"exposed_comm_s", "/step/exposed_comm_s"},
    {"optimizer_s", "/step/optimizer_s"},
    {"comm_busy_s", "/step/comm_busy_s"},
    {"samples_per_s", "/throughput/samples_per_s"},
    {"tokens_per_s", "/throughput/tokens_per_s"},
    {"scaling_efficiency", "/scaling_efficiency"},
    {"allreduce_time_s", "/allreduce/time_s"},
    {"allreduce_busbw_GBps", "/allreduce/busbw_GBps"},
    {"model_state_bytes_per_gpu", "/memory/model_state_bytes_per_gpu"},
    {"memory_bytes_per_gpu", "/memory/needed_bytes_per_gpu"},
    {"gpu_memory_bytes", "/memory/gpu_memory_bytes"},
    {"fits", "/memory/fits"},
    {"buckets", ""},
    {"gpu", "/context/gpu"},
    {"price_per_gpu_hour", "/cost/price_per_gpu_hour"},
    {"cost_per_step", "/cost/per_step"},
    {"cost_per_million_tokens", "/cost/per_million_tokens"},
    {"cost_to_train", "/cost/to_train"},
    {"time_to_train_s", "/time_to_train_s"},
    {"tensor", "/parallelism/tensor"},
    {"tensor_comm_s", "/step/tensor_comm_s"},
    {"model_flops_per_s_per_gpu", "/throughput/model_flops_per_s_per_gpu"},
    {"mfu", "/throughput/mfu"},
    {"context", "/parallelism/context"},         // empty without context parallelism (the JSON has it when > 1)
    {"context_comm_s", "/step/context_comm_s"},  // likewise
};

std::string csv_field(std::string text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c == '\n' ? ' ' : c);
  return out + "\"";
}

std::string figure(const json& result, const char* column, const char* pointer) {
  if (std::string(column) == "buckets") return std::to_string(result.at("buckets").size());
  const json::json_pointer p(pointer);
  if (!result.contains(p)) return "";
  const json& v = result.at(p);
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  return fmt::format("{:.9g}", v.get<double>());
}

// The CSV row of a JSON line, parsed.
std::string csv_row_of(const SweepSpec& sweep, const json& line) {
  std::vector<std::string> cells{std::to_string(line.at("point").get<long long>())};
  for (const auto& a : sweep.axes) cells.push_back(line.at("axes").value(a.key_path, ""));
  const bool ok = line.contains("result");
  cells.push_back(ok ? "ok" : "error");
  cells.push_back(ok ? "" : line.at("error").get<std::string>());
  for (const auto& [column, pointer] : kFigures) {
    cells.push_back(!ok                                ? ""
                    : std::string(column) == "buckets" ? std::to_string(line.at("result").value("buckets_count", 0))
                                                       : figure(line.at("result"), column, pointer));
  }
  std::string row;
  for (size_t i = 0; i < cells.size(); ++i) row += (i ? "," : "") + csv_field(cells[i]);
  return row;
}

}  // namespace

PointRow evaluate_point(const SweepSpec& sweep, int64_t index) {
  const auto overrides = sweep_point(sweep, index);
  json line{{"point", index}, {"axes", json::object()}};
  for (const auto& o : overrides) line["axes"][o.key_path] = o.value;
  InputLog inputs;
  read_input_file(sweep.file);  // the sweep file is an input of every point
  try {
    const Scenario s = load_scenario(sweep.base, overrides);
    const StepPlan plan = make_step_plan(s);
    SimOptions options;
    options.progress = false;
    options.timeline = false;  // a row has no timeline
    StepResult r = sweep.command == "estimate" ? estimate(s, plan).result : simulate(s, plan, options);
    // Per-bucket and per-call timing stays out of sweep files (to_json writes empty lists; at 1,024 GPUs the calls were
    // 52 of a row's 54 KB): counted, the buckets in the CSV too.
    const size_t buckets = r.buckets.size(), calls = r.comm.size();
    r.buckets.clear();
    r.comm.clear();
    json result = to_json(r);
    result["buckets_count"] = buckets;
    result["comm_count"] = calls;
    line["result"] = std::move(result);
  } catch (const std::exception& e) {
    line["error"] = e.what();
  }
  line["inputs"] = inputs.files();
  return {line.dump(), csv_row_of(sweep, line), line.contains("result")};
}

std::vector<std::string> csv_header(const SweepSpec& sweep) {
  std::vector<std::string> h{"point"};
  for (const auto& a : sweep.axes) h.push_back(a.key_path);
  h.push_back("status");
  h.push_back("error");
  for (const auto& [column, pointer] : kFigures) h.push_back(column);
  return h;
}

std::string csv_row(const SweepSpec& sweep, const std::string& json_line) {
  return csv_row_of(sweep, json::parse(json_line));
}

}  // namespace dpsim
