// DDP entries of the published reference set: each scored number names, in the entry's scenario.predict block,
// the scenario file and the overrides that reproduce what the source states (model, batch, precision,
// accumulation, GPUs), and which of its numbers it predicts. dpsim simulates that scenario and compares.

#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "dpsim/error.hpp"
#include "dpsim/estimate.hpp"
#include "dpsim/load.hpp"
#include "dpsim/plan.hpp"
#include "dpsim/sim/simulate.hpp"
#include "dpsim/sweep_spec.hpp"
#include "dpsim/validation/compare.hpp"
#include "reference_internal.hpp"

namespace dpsim::validation::detail {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// "/12/scenario/predict/numbers/3/kind" -> "[12].scenario.predict.numbers[3].kind"
std::string key_path(const std::string& pointer) {
  std::string out;
  size_t start = 1;
  while (start <= pointer.size()) {
    const size_t end = std::min(pointer.find('/', start), pointer.size());
    const std::string token = pointer.substr(start, end - start);
    const bool index = !token.empty() && token.find_first_not_of("0123456789") == std::string::npos;
    out += index ? "[" + token + "]" : (out.empty() ? "" : ".") + token;
    start = end + 1;
  }
  return out;
}

}  // namespace

void fail_at(const EntrySite& site, const std::string& pointer, const std::string& message) {
  int line = 0;
  if (site.lines != nullptr)
    if (const auto it = site.lines->find(pointer); it != site.lines->end()) line = it->second;
  throw InputError(site.file.string(), line, key_path(pointer), message);
}

namespace {

// e2e_tokens_per_gpu: end-to-end training throughput, tokens per second per GPU (samples/s x sequence / GPUs).
// e2e_hardware_tflops_per_gpu: "teraFLOP/s per GPU" as Megatron-LM's papers count it, recomputation included
// (Narayanan et al. 2021 eq. 3): dpsim's throughput.hardware_flops_per_s_per_gpu (docs/metrics.md).
// e2e_weak_scaling: a weak-scaling efficiency in percent as Megatron-LM's 2019 paper draws it (Shoeybi et al., Figure
// 5): per-GPU hardware FLOP/s of this run over its baseline's (one GPU, a smaller model), x 100.
// e2e_mfu_pct: model FLOPs utilization in percent, recomputation not counted: dpsim's throughput.mfu x 100
// (Megatron-LM's model FLOPs over the GPU's peak in the training dtype, docs/metrics.md).
const std::set<std::string> kDdpKinds{"ddp_step_time",      "ddp_scaling",        "ddp_throughput",
                                      "ddp_strong_scaling", "e2e_tokens_per_gpu", "e2e_hardware_tflops_per_gpu",
                                      "e2e_weak_scaling",   "e2e_mfu_pct"};
// The kinds whose number is this run against a baseline run (`baseline`: overrides on top of the number's `set`).
bool needs_baseline(const std::string& kind) { return kind == "ddp_strong_scaling" || kind == "e2e_weak_scaling"; }

// One DDP number an entry publishes and the scenario that predicts it.
struct DdpNumber {
  std::string label;
  std::string kind;  // one of kDdpKinds
  std::vector<std::string> measured;
  fs::path scenario;
  std::vector<Override> set;  // the predict block's, then the number's
  // On top of `set`: ddp_strong_scaling's 1-node run at the same global batch, e2e_weak_scaling's baseline run
  std::vector<Override> baseline;
  std::string note;
  bool closed_form = false;  // the predict block's `closed_form: <why>`: estimate(), even when validate simulates
};

// Reads a predict block; every error names the file, the line and the key path.
class PredictReader {
 public:
  explicit PredictReader(const EntrySite& site) : site_(site) {}

  [[noreturn]] void fail(const std::string& pointer, const std::string& message) const {
    fail_at(site_, pointer, message);
  }

  const json& object(const json& j, const std::string& pointer, std::initializer_list<const char*> allowed) const {
    if (!j.is_object()) fail(pointer, "expected a mapping");
    for (const auto& [key, value] : j.items()) {
      bool known = false;
      std::string names;
      for (const char* a : allowed) {
        known = known || key == a;
        names += names.empty() ? a : std::string(", ") + a;
      }
      if (!known) fail(pointer + "/" + key, fmt::format("unknown key \"{}\" (allowed: {})", key, names));
    }
    return j;
  }

  std::string text(const json& j, const std::string& pointer, const char* key) const {
    if (!j.contains(key)) fail(pointer, fmt::format("\"{}\" is required", key));
    if (!j[key].is_string() || j[key].get<std::string>().empty())
      fail(pointer + "/" + key, "expected a non-empty text");
    return j[key].get<std::string>();
  }

  // {key.path: value, ...} as scenario overrides (the value's YAML text).
  std::vector<Override> overrides(const json& j, const std::string& pointer) const {
    if (!j.is_object()) fail(pointer, "expected a mapping of scenario key paths to values");
    std::vector<Override> out;
    for (const auto& [key, value] : j.items()) {
      if (value.is_object() || value.is_array() || value.is_null())
        fail(pointer + "/" + key, "expected a single value (number, size, name, true/false)");
      out.push_back({key, value.is_string() ? value.get<std::string>() : value.dump()});
    }
    return out;
  }

 private:
  const EntrySite& site_;
};

// The predict block's scenario file, relative to the entry's file; it must exist.
fs::path predict_scenario(const PredictReader& r, const json& predict, const std::string& at, const EntrySite& site) {
  const fs::path scenario = site.file.parent_path() / r.text(predict, at, "scenario");
  std::error_code ec;
  if (!fs::is_regular_file(scenario, ec))
    r.fail(at + "/scenario", fmt::format("scenario file {} does not exist", scenario.string()));
  return scenario;
}

std::vector<DdpNumber> read_predict(const json& predict, const EntrySite& site) {
  const PredictReader r(site);
  const std::string at = site.pointer + "/scenario/predict";
  r.object(predict, at, {"scenario", "note", "set", "numbers", "closed_form"});
  const fs::path scenario = predict_scenario(r, predict, at, site);
  const std::string note = predict.contains("note") ? r.text(predict, at, "note") : "";
  // closed_form: the reason the entry is estimated rather than simulated (a simulation too long for the suite)
  const bool closed_form = predict.contains("closed_form") && !r.text(predict, at, "closed_form").empty();
  const std::vector<Override> common =
      predict.contains("set") ? r.overrides(predict["set"], at + "/set") : std::vector<Override>{};
  if (!predict.contains("numbers") || !predict["numbers"].is_array() || predict["numbers"].empty())
    r.fail(at, "\"numbers\" must list at least one published number to predict");
  std::vector<DdpNumber> out;
  for (size_t i = 0; i < predict["numbers"].size(); ++i) {
    const std::string p = at + "/numbers/" + std::to_string(i);
    const json& n = r.object(predict["numbers"][i], p, {"label", "kind", "measured", "set", "baseline", "note"});
    DdpNumber d{r.text(n, p, "label"), r.text(n, p, "kind"), {}, scenario, common, {}, note, closed_form};
    if (kDdpKinds.count(d.kind) == 0)
      r.fail(p + "/kind", fmt::format("\"{}\" is not one of: ddp_step_time, ddp_scaling, ddp_throughput, "
                                      "ddp_strong_scaling, e2e_tokens_per_gpu, e2e_hardware_tflops_per_gpu, "
                                      "e2e_weak_scaling, e2e_mfu_pct",
                                      d.kind));
    if (!n.contains("measured") || !n["measured"].is_array() || n["measured"].empty())
      r.fail(p, "\"measured\" must list the keys of the number under the entry's measured block");
    for (const auto& k : n["measured"]) d.measured.push_back(k.is_string() ? k.get<std::string>() : k.dump());
    if (n.contains("set"))
      for (const Override& o : r.overrides(n["set"], p + "/set")) d.set.push_back(o);
    if (n.contains("baseline")) d.baseline = r.overrides(n["baseline"], p + "/baseline");
    if (needs_baseline(d.kind) != n.contains("baseline"))
      r.fail(p,
             "\"baseline\" (ddp_strong_scaling: the 1-node run at the same global batch; e2e_weak_scaling: the "
             "baseline run) is required for, and only for, ddp_strong_scaling and e2e_weak_scaling");
    if (n.contains("note")) d.note = r.text(n, p, "note");
    out.push_back(std::move(d));
  }
  return out;
}

// The scenario with its overrides, simulated (or estimated); each distinct one once.
StepResult predict_step(const fs::path& file, const std::vector<Override>& set, const Context& ctx, bool simulated,
                        Scenario& s) {
  std::string key = (simulated ? "simulate\n" : "estimate\n") + file.string();
  for (const Override& x : set) key += "\n" + x.key_path + "=" + x.value;
  if (const auto hit = ctx.predicted.find(key); hit != ctx.predicted.end()) {
    s = hit->second.first;
    return hit->second.second;
  }
  s = load_scenario(file, set);
  const StepPlan plan = make_step_plan(s);
  StepResult res;
  if (simulated) {
    SimOptions so;
    so.progress = false;
    so.trace_ranks = 0;
    so.timeline = false;  // scored on the step's figures
    res = simulate(s, plan, so);
  } else {
    res = estimate(s, plan).result;
  }
  ctx.predicted.emplace(key, std::make_pair(s, res));
  return res;
}

// The predicted scenario runs on the topology the entry maps to.
void check_topology(const Scenario& s, const fs::path& scenario, const std::string& topology, const EntrySite& site) {
  const std::string used = fs::path(s.topology.file).stem().string();
  if (used != topology)
    PredictReader(site).fail(
        site.pointer + "/scenario/predict/scenario",
        fmt::format("{} runs on topology {}, but the entry maps to {}", scenario.string(), used, topology));
}

// An entry with no scenario.predict block is skipped, with its scenario.not_predictable reason.
bool skipped_without_predict(const std::string& id, const std::string& file, const json& scenario,
                             ReferenceReport& out) {
  if (scenario.contains("predict")) return false;
  const std::string why = str(scenario, "not_predictable");
  out.skipped.push_back(
      {id, file, "not predictable: " + (why.empty() ? std::string("no scenario.predict block") : why)});
  return true;
}

bool simulated(const DdpNumber& d, const ReferenceOptions& o) { return o.simulate_ddp && !d.closed_form; }

double predicted_value(const DdpNumber& d, const Context& ctx, const ReferenceOptions& o, Scenario& s) {
  const StepResult res = predict_step(d.scenario, d.set, ctx, simulated(d, o), s);
  if (d.kind == "ddp_scaling") return res.scaling_efficiency * s.world_size();
  if (d.kind == "ddp_throughput") return res.samples_per_s;
  if (d.kind == "e2e_tokens_per_gpu")
    return res.samples_per_s * static_cast<double>(s.training.sequence_length) / s.world_size();
  if (d.kind == "e2e_hardware_tflops_per_gpu") return res.hardware_flops_per_s_per_gpu / 1e12;
  if (d.kind == "e2e_mfu_pct") return 100.0 * res.mfu;
  if (needs_baseline(d.kind)) {
    std::vector<Override> base = d.set;
    base.insert(base.end(), d.baseline.begin(), d.baseline.end());
    Scenario one;
    const StepResult b = predict_step(d.scenario, base, ctx, simulated(d, o), one);
    if (d.kind == "e2e_weak_scaling") return 100.0 * res.hardware_flops_per_s_per_gpu / b.hardware_flops_per_s_per_gpu;
    return b.step_time_s / res.step_time_s;  // strong scaling: the same global batch
  }
  return res.step_time_s;
}

}  // namespace

void ddp_entry(const json& e, const EntrySite& site, const Context& ctx, const ReferenceOptions& o,
               ReferenceReport& out) {
  const std::string id = str(e, "id");
  const std::string file = site.file.filename().string();
  const json& scenario = member(e, "scenario");
  if (skipped_without_predict(id, file, scenario, out)) return;
  const std::string topology = str(scenario, "topology");
  std::set<std::string> configurations;  // each number's scenario and overrides: a run published as running
  for (const DdpNumber& d : read_predict(scenario["predict"], site)) {
    json::json_pointer ptr;
    for (const auto& k : d.measured) ptr /= k;
    const bool has = e.contains("measured") && e["measured"].contains(ptr);
    const auto value = has ? parse_published(e["measured"][ptr]) : std::nullopt;
    if (!value) {
      out.skipped.push_back({id, file, d.label + ": the number is not in the entry"});
      continue;
    }
    ReferencePoint p;
    p.entry = id;
    p.file = file;
    p.label = d.label;
    p.kind = d.kind;
    p.topology = topology;
    p.published = value->mid();
    p.published_low = value->low;
    p.published_high = value->high;
    p.unit = d.kind == "ddp_step_time"                                 ? "s"
             : d.kind == "ddp_throughput"                              ? "samples/s"
             : d.kind == "e2e_tokens_per_gpu"                          ? "tokens/s/GPU"
             : d.kind == "e2e_hardware_tflops_per_gpu"                 ? "TFLOP/s/GPU"
             : d.kind == "e2e_weak_scaling" || d.kind == "e2e_mfu_pct" ? "%"
                                                                       : "x";
    p.note = d.note;
    Scenario s;
    try {
      p.predicted = predicted_value(d, ctx, o, s);
    } catch (const InputError&) {
      throw;  // the reference set's own scenario or overrides are wrong: say so, do not skip
    } catch (const std::exception& ex) {
      out.skipped.push_back({id, file, fmt::format("{}: not predictable: {}", d.label, ex.what())});
      continue;
    }
    check_topology(s, d.scenario, topology, site);
    p.nodes = s.topology.nodes;
    p.gpus_per_node = s.topology.gpus_per_node;
    p.predicted_by = simulated(d, o) ? "simulate" : "estimate";
    p.cls = class_of(s.topology);
    p.rel_error = relative_error_to_range(p.predicted, value->low, value->high);
    out.points.push_back(p);
    std::string configuration = d.scenario.string();
    for (const Override& x : d.set) configuration += "\n" + x.key_path + "=" + x.value;
    if (configurations.insert(configuration).second) {
      const StepResult res = predict_step(d.scenario, d.set, ctx, simulated(d, o), s);
      out.memory.push_back({id, file, d.label, res.memory_need_bytes(), res.gpu_memory_bytes, res.fits});
    }
  }
}

// A configuration a source reports as having run, or as having run out of GPU memory (CUDA OOM): its scenario's
// memory (memory.needed_bytes_per_gpu against the GPU's) must say the same. Memory does not depend on the step's
// timing, so the scenario is estimated, not simulated.
void memory_entry(const json& e, const EntrySite& site, const Context& ctx, ReferenceReport& out) {
  const std::string id = str(e, "id");
  const std::string file = site.file.filename().string();
  const json& scenario = member(e, "scenario");
  if (skipped_without_predict(id, file, scenario, out)) return;
  const PredictReader r(site);
  const std::string at = site.pointer + "/scenario/predict";
  const json& predict = r.object(scenario["predict"], at, {"scenario", "note", "set"});
  const fs::path path = predict_scenario(r, predict, at, site);
  const std::vector<Override> set =
      predict.contains("set") ? r.overrides(predict["set"], at + "/set") : std::vector<Override>{};
  const json& measured = member(e, "measured");
  const std::string outcome = str(measured, "outcome");
  if (outcome != "out_of_memory" && outcome != "ran")
    r.fail(site.pointer + (measured.is_object() ? "/measured/outcome" : "/measured"),
           fmt::format("measured.outcome must be out_of_memory or ran (what the source reports), got \"{}\"", outcome));
  Scenario s;
  const StepResult res = predict_step(path, set, ctx, false, s);
  check_topology(s, path, str(scenario, "topology"), site);
  const std::string label = predict.contains("note") ? r.text(predict, at, "note") : "configuration";
  RunMemory m{id, file, label, res.memory_need_bytes(), res.gpu_memory_bytes, res.fits};
  m.published_oom = outcome == "out_of_memory";
  out.memory.push_back(m);
}

}  // namespace dpsim::validation::detail
