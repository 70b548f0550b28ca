#include "dpsim/result.hpp"

#include <unistd.h>
#include <cerrno>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "dpsim/error.hpp"

namespace dpsim {

using nlohmann::json;

namespace {

void put(json& j, const char* key, const std::optional<double>& v) {
  if (v) j[key] = *v;
}

// "cost" (GPUs billed, price figures) and top-level "time_to_train_s", "steps_to_train": only what was computed.
void cost_to_json(const TrainingCost& c, json& j) {
  if (!c.price_per_gpu_hour && !c.time_to_train_s) return;
  json cost{{"gpus", c.gpus}};
  put(cost, "price_per_gpu_hour", c.price_per_gpu_hour);
  put(cost, "per_step", c.per_step);
  put(cost, "per_million_tokens", c.per_million_tokens);
  put(cost, "to_train", c.to_train);
  j["cost"] = std::move(cost);
  put(j, "time_to_train_s", c.time_to_train_s);
  put(j, "steps_to_train", c.steps_to_train);
}

std::optional<double> get(const json& j, const char* key) {
  if (!j.contains(key)) return std::nullopt;
  return j.at(key).get<double>();
}

TrainingCost cost_from_json(const json& j) {
  TrainingCost c;
  if (j.contains("cost")) {
    const json& cost = j.at("cost");
    c.gpus = cost.value("gpus", 0);
    c.price_per_gpu_hour = get(cost, "price_per_gpu_hour");
    c.per_step = get(cost, "per_step");
    c.per_million_tokens = get(cost, "per_million_tokens");
    c.to_train = get(cost, "to_train");
  }
  c.time_to_train_s = get(j, "time_to_train_s");
  c.steps_to_train = get(j, "steps_to_train");
  return c;
}

json bound_json(const StepBound& b) {
  return {{"step_time_s", b.step_time_s},
          {"exposed_comm_s", b.exposed_comm_s},
          {"samples_per_s", b.samples_per_s},
          {"scaling_efficiency", b.scaling_efficiency}};
}

StepBound bound_from_json(const json& j) {
  return {j.at("step_time_s").get<double>(), j.at("exposed_comm_s").get<double>(), j.at("samples_per_s").get<double>(),
          j.at("scaling_efficiency").get<double>()};
}

// JSON "compute": each key and its field, for writing and reading.
constexpr std::pair<const char*, double ComputeByKind::*> kComputeKeys[] = {
    {"gemm_s", &ComputeByKind::gemm_s},
    {"gemm_flops", &ComputeByKind::gemm_flops},
    {"attention_s", &ComputeByKind::attention_s},
    {"attention_flops", &ComputeByKind::attention_flops},
    {"memory_bound_s", &ComputeByKind::memory_bound_s},
    {"memory_bound_bytes", &ComputeByKind::memory_bound_bytes},
    {"optimizer_s", &ComputeByKind::optimizer_s}};

json compute_json(const ComputeByKind& c) {
  json j = json::object();
  for (const auto& [key, field] : kComputeKeys) j[key] = c.*field;
  return j;
}

ComputeByKind compute_from_json(const json& j) {
  ComputeByKind c;
  for (const auto& [key, field] : kComputeKeys) c.*field = j.at(key).get<double>();
  return c;
}

}  // namespace

json to_json(const StepResult& r) {
  json j;
  j["schema_version"] = kSchemaVersion;
  j["scenario"] = r.scenario;
  j["mode"] = r.mode;
  j["context"] = r.context;
  j["model"] = {
      {"parameters", r.parameters}, {"parameters_per_gpu", r.parameters_per_gpu}, {"gradient_bytes", r.gradient_bytes}};
  if (r.trainable_parameters) {
    j["model"]["trainable"] = r.trainable;
    j["model"]["trainable_parameters"] = *r.trainable_parameters;
  }
  j["memory"] = {{"model_state_bytes_per_gpu", r.model_state_bytes_per_gpu},
                 {"activation_bytes_per_gpu", r.activation_bytes_per_gpu},
                 {"ddp_buffer_bytes_per_gpu", r.ddp_buffer_bytes_per_gpu},
                 {"unsharded_bytes_per_gpu", r.unsharded_bytes_per_gpu},
                 {"cuda_context_bytes_per_gpu", r.cuda_context_bytes_per_gpu},
                 {"cublas_workspace_bytes_per_gpu", r.cublas_workspace_bytes_per_gpu},
                 {"nccl_communicators", r.nccl_communicators},
                 {"nccl_bytes_per_gpu", r.nccl_bytes_per_gpu},
                 {"runtime_bytes_per_gpu", r.runtime_bytes_per_gpu()},
                 {"needed_bytes_per_gpu", r.memory_need_bytes()},
                 {"gpu_memory_bytes", r.gpu_memory_bytes},
                 {"fits", r.fits}};
  // Only under autocast (training.compute_dtype on fp32 parameters), as model.trainable only when some is frozen.
  if (r.weight_copy_bytes_per_gpu > 0) j["memory"]["weight_copy_bytes_per_gpu"] = r.weight_copy_bytes_per_gpu;
  j["allreduce"] = {{"bytes_sent_per_gpu", r.allreduce_bytes_sent_per_gpu},
                    {"time_s", r.allreduce_time_s},
                    {"busbw_GBps", r.allreduce_busbw_GBps},
                    {"algorithm", r.allreduce_algorithm},
                    {"nccl",
                     {{"time_s", r.nccl_time_s},
                      {"busbw_GBps", r.nccl_busbw_GBps},
                      {"algorithm", r.nccl_algorithm},
                      {"protocol", r.nccl_protocol}}}};
  j["step"] = {{"time_s", r.step_time_s},
               {"forward_s", r.forward_s},
               {"backward_s", r.backward_s},
               {"exposed_comm_s", r.exposed_comm_s},
               {"optimizer_s", r.optimizer_s},
               {"comm_busy_s", r.comm_busy_s},
               {"tensor_comm_s", r.tensor_comm_s},
               {"p2p_s", r.p2p_s},
               {"pipeline_bubble_s", r.pipeline_bubble_s},
               {"no_overlap_time_s", r.no_overlap_step_s}};
  j["throughput"] = {{"samples_per_s", r.samples_per_s},
                     {"tokens_per_s", r.tokens_per_s},
                     {"model_flops_per_s_per_gpu", r.model_flops_per_s_per_gpu},
                     {"mfu", r.mfu},
                     {"hardware_flops_per_s_per_gpu", r.hardware_flops_per_s_per_gpu},
                     {"hfu", r.hfu},
                     {"peak_flops_per_s", r.peak_flops_per_s}};
  j["scaling_efficiency"] = r.scaling_efficiency;
  cost_to_json(r.cost, j);
  j["buckets"] = json::array();
  for (const auto& b : r.buckets) {
    j["buckets"].push_back({{"index", b.index},
                            {"bytes", b.bytes},
                            {"ready_s", b.ready_s},
                            {"start_s", b.start_s},
                            {"end_s", b.end_s},
                            {"algorithm", b.algorithm},
                            {"protocol", b.protocol}});
  }
  j["comm"] = json::array();
  for (const auto& c : r.comm) {
    j["comm"].push_back({{"kind", c.kind},
                         {"group", c.group},
                         {"index", c.index},
                         {"bytes", c.bytes},
                         {"stream", c.stream},
                         {"ready_s", c.ready_s},
                         {"start_s", c.start_s},
                         {"end_s", c.end_s},
                         {"algorithm", c.algorithm},
                         {"protocol", c.protocol}});
  }
  j["parallelism"] = {{"data", r.data_parallel},
                      {"tensor", r.tensor_parallel},
                      {"pipeline", r.pipeline_parallel},
                      {"sequence_parallel", r.sequence_parallel},
                      {"sharding", r.sharding}};
  if (r.shard_group > 0) j["parallelism"]["shard_group"] = r.shard_group;
  if (r.context_parallel > 1) {
    j["parallelism"]["context"] = r.context_parallel;
    j["step"]["context_comm_s"] = r.context_comm_s;
  }
  if (r.tensor_parallel > 1) {
    j["parallelism"]["tp_comm_overlap"] = r.tp_comm_overlap;
    j["parallelism"]["tensor_impl"] = r.tensor_impl;
  }
  if (r.pipeline_parallel > 1) {
    j["parallelism"]["schedule"] = r.pipeline_schedule;
    j["parallelism"]["virtual_stages"] = r.virtual_stages;
    j["step"]["reported_stage"] = r.reported_stage;
    j["stages"] = json::array();
    for (const StageTiming& t : r.stages)
      j["stages"].push_back({{"stage", t.stage},
                             {"forward_s", t.forward_s},
                             {"backward_s", t.backward_s},
                             {"optimizer_s", t.optimizer_s},
                             {"tensor_comm_s", t.tensor_comm_s},
                             {"p2p_s", t.p2p_s},
                             {"exposed_comm_s", t.exposed_comm_s},
                             {"comm_busy_s", t.comm_busy_s},
                             {"bubble_s", t.bubble_s},
                             {"end_s", t.end_s},
                             {"memory_needed_bytes_per_gpu", t.memory_need_bytes}});
    if (r.context_parallel > 1)
      for (size_t k = 0; k < r.stages.size(); ++k) j["stages"][k]["context_comm_s"] = r.stages[k].context_comm_s;
  }
  if (r.bounds)
    j["bounds"] = {{"perfect_overlap", bound_json(r.bounds->perfect_overlap)},
                   {"no_overlap", bound_json(r.bounds->no_overlap)}};
  if (r.compute_by_kind) j["compute"] = compute_json(*r.compute_by_kind);
  if (!r.spreads.empty()) j["spreads"] = r.spreads;
  j["advice"] = r.advice;
  return j;
}

namespace {

const json& need(const json& j, const char* section, const char* key) {
  const json& s = section ? j.at(section) : j;
  if (!s.contains(key))
    throw InputError(fmt::format("result JSON: missing key {}{}{}", section ? section : "", section ? "." : "", key));
  return s.at(key);
}

}  // namespace

StepResult result_from_json(const json& j) {
  try {
    StepResult r;
    const int version = need(j, nullptr, "schema_version").get<int>();
    if (version != 1 && version != kSchemaVersion) {  // version 1 files have no comm[] and no parallelism
      throw InputError(
          fmt::format("result JSON: schema_version {} is not 1 or {}", j.at("schema_version").dump(), kSchemaVersion));
    }
    r.scenario = need(j, nullptr, "scenario").get<std::string>();
    r.mode = j.value("mode", "");
    r.context = j.value("context", json::object());
    r.parameters = need(j, "model", "parameters").get<long long>();
    r.parameters_per_gpu = j.at("model").value("parameters_per_gpu", r.parameters);  // absent before tensor parallelism
    r.gradient_bytes = need(j, "model", "gradient_bytes").get<long long>();
    if (j.at("model").contains("trainable_parameters")) {
      r.trainable = j.at("model").value("trainable", "");
      r.trainable_parameters = j.at("model").at("trainable_parameters").get<long long>();
    }
    r.model_state_bytes_per_gpu = need(j, "memory", "model_state_bytes_per_gpu").get<double>();
    r.activation_bytes_per_gpu = need(j, "memory", "activation_bytes_per_gpu").get<double>();
    r.ddp_buffer_bytes_per_gpu = j.at("memory").value("ddp_buffer_bytes_per_gpu", 0.0);
    r.gpu_memory_bytes = need(j, "memory", "gpu_memory_bytes").get<double>();
    r.fits = need(j, "memory", "fits").get<bool>();
    r.allreduce_bytes_sent_per_gpu = need(j, "allreduce", "bytes_sent_per_gpu").get<double>();
    r.allreduce_time_s = need(j, "allreduce", "time_s").get<double>();
    r.allreduce_busbw_GBps = need(j, "allreduce", "busbw_GBps").get<double>();
    r.allreduce_algorithm = need(j, "allreduce", "algorithm").get<std::string>();
    if (j.at("allreduce").contains("nccl")) {
      const json& n = j.at("allreduce").at("nccl");
      r.nccl_time_s = n.value("time_s", 0.0);
      r.nccl_busbw_GBps = n.value("busbw_GBps", 0.0);
      r.nccl_algorithm = n.value("algorithm", "");
      r.nccl_protocol = n.value("protocol", "");
    }
    r.step_time_s = need(j, "step", "time_s").get<double>();
    r.forward_s = need(j, "step", "forward_s").get<double>();
    r.backward_s = need(j, "step", "backward_s").get<double>();
    r.exposed_comm_s = need(j, "step", "exposed_comm_s").get<double>();
    r.optimizer_s = need(j, "step", "optimizer_s").get<double>();
    r.comm_busy_s = j.at("step").value("comm_busy_s", 0.0);
    r.tensor_comm_s = j.at("step").value("tensor_comm_s", 0.0);
    r.context_comm_s = j.at("step").value("context_comm_s", 0.0);
    r.p2p_s = j.at("step").value("p2p_s", 0.0);
    r.pipeline_bubble_s = j.at("step").value("pipeline_bubble_s", 0.0);
    r.reported_stage = j.at("step").value("reported_stage", 0);
    for (const auto& t : j.value("stages", json::array()))
      r.stages.push_back({t.at("stage").get<int>(), t.at("forward_s").get<double>(), t.at("backward_s").get<double>(),
                          t.at("optimizer_s").get<double>(), t.at("tensor_comm_s").get<double>(),
                          t.at("p2p_s").get<double>(), t.at("exposed_comm_s").get<double>(),
                          t.value("comm_busy_s", 0.0), t.at("bubble_s").get<double>(), t.at("end_s").get<double>(),
                          t.at("memory_needed_bytes_per_gpu").get<double>(), t.value("context_comm_s", 0.0)});
    r.no_overlap_step_s = j.at("step").value("no_overlap_time_s", 0.0);
    r.samples_per_s = need(j, "throughput", "samples_per_s").get<double>();
    r.tokens_per_s = need(j, "throughput", "tokens_per_s").get<double>();
    r.model_flops_per_s_per_gpu = j.at("throughput").value("model_flops_per_s_per_gpu", 0.0);
    r.mfu = j.at("throughput").value("mfu", 0.0);
    r.hardware_flops_per_s_per_gpu = j.at("throughput").value("hardware_flops_per_s_per_gpu", 0.0);
    r.hfu = j.at("throughput").value("hfu", 0.0);
    r.peak_flops_per_s = j.at("throughput").value("peak_flops_per_s", 0.0);
    r.scaling_efficiency = need(j, nullptr, "scaling_efficiency").get<double>();
    r.cost = cost_from_json(j);
    for (const auto& b : need(j, nullptr, "buckets")) {
      r.buckets.push_back({b.at("index").get<int>(), b.at("bytes").get<long long>(), b.at("ready_s").get<double>(),
                           b.at("start_s").get<double>(), b.at("end_s").get<double>(), b.value("algorithm", ""),
                           b.value("protocol", "")});
    }
    for (const auto& c : j.value("comm", json::array()))
      r.comm.push_back({c.at("kind").get<std::string>(), c.at("group").get<std::string>(), c.at("index").get<int>(),
                        c.at("bytes").get<double>(), c.value("stream", ""), c.value("ready_s", -1.0),
                        c.at("start_s").get<double>(), c.at("end_s").get<double>(), c.value("algorithm", ""),
                        c.value("protocol", "")});
    r.unsharded_bytes_per_gpu = j.at("memory").value("unsharded_bytes_per_gpu", 0.0);
    r.weight_copy_bytes_per_gpu = j.at("memory").value("weight_copy_bytes_per_gpu", 0.0);
    // Results written before the runtime reserve was counted have none of these: 0.
    r.cuda_context_bytes_per_gpu = j.at("memory").value("cuda_context_bytes_per_gpu", 0.0);
    r.cublas_workspace_bytes_per_gpu = j.at("memory").value("cublas_workspace_bytes_per_gpu", 0.0);
    r.nccl_communicators = j.at("memory").value("nccl_communicators", 0);
    r.nccl_bytes_per_gpu = j.at("memory").value("nccl_bytes_per_gpu", 0.0);
    if (j.contains("parallelism")) {
      r.sharding = j.at("parallelism").value("sharding", "none");
      r.shard_group = j.at("parallelism").value("shard_group", 0);
      r.data_parallel = j.at("parallelism").value("data", 1);
      r.tensor_parallel = j.at("parallelism").value("tensor", 1);
      r.context_parallel = j.at("parallelism").value("context", 1);
      r.pipeline_parallel = j.at("parallelism").value("pipeline", 1);
      r.pipeline_schedule = j.at("parallelism").value("schedule", "");
      r.virtual_stages = j.at("parallelism").value("virtual_stages", 1);
      r.sequence_parallel = j.at("parallelism").value("sequence_parallel", false);
      r.tp_comm_overlap = j.at("parallelism").value("tp_comm_overlap", "none");
      r.tensor_impl = j.at("parallelism").value("tensor_impl", "megatron");
    }
    if (j.contains("bounds"))
      r.bounds = StepBounds{bound_from_json(j.at("bounds").at("perfect_overlap")),
                            bound_from_json(j.at("bounds").at("no_overlap"))};
    if (j.contains("compute")) r.compute_by_kind = compute_from_json(j.at("compute"));
    r.spreads = j.value("spreads", json::object());
    r.advice = j.value("advice", std::vector<std::string>{});
    return r;
  } catch (const json::exception& e) {
    throw InputError(std::string("result JSON: ") + e.what());
  }
}

StepResult read_result(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw InputError(file.string(), 0, "", "cannot be read");
  try {
    return result_from_json(json::parse(in));
  } catch (const json::parse_error& e) {
    throw InputError(file.string(), 0, "", std::string("not valid JSON: ") + e.what());
  } catch (const InputError& e) {
    throw InputError(file.string(), 0, "", e.what());
  }
}

bool write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void write_file_atomic(const std::filesystem::path& file, const std::string& text) {
  const std::filesystem::path dir = file.parent_path().empty() ? std::filesystem::path(".") : file.parent_path();
  const std::filesystem::path tmp = dir / fmt::format(".{}.tmp.{}", file.filename().string(), ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw RuntimeError(fmt::format("cannot write {}: directory missing or not writable", file.string()));
    out << text;
    out.flush();
    if (!out) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      throw RuntimeError(fmt::format("cannot write {}: write failed (disk full?)", file.string()));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, file, ec);
  if (ec) {
    const std::string why = ec.message();  // before remove() reuses ec
    std::filesystem::remove(tmp, ec);
    throw RuntimeError(fmt::format("cannot write {}: {}", file.string(), why));
  }
}

}  // namespace dpsim
