// training.trainable (all | lora | frozen_except), training.frozen_except and the lora: block with PEFT's LoraConfig
// names; PEFT's defaults from data/lora.yaml. Every name must match something in the model.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dpsim/input_file.hpp"
#include "dpsim/load.hpp"
#include "dpsim/model.hpp"
#include "dpsim/trainable.hpp"
#include "load_internal.hpp"

namespace dpsim {

namespace {

struct LoraData {
  Lora defaults;
  std::map<std::string, std::vector<std::string>> target_modules;  // per model family
  double nf4_bytes = 0;                                            // QLoRA's stored bytes per weight
};

const char* family_name(ModelFamily f) {
  switch (f) {
    case ModelFamily::llama: return "llama";
    case ModelFamily::gpt2: return "gpt2";
    case ModelFamily::bert: return "bert";
  }
  return "?";
}

std::vector<std::string> string_list(const YNode& n) {
  if (!n.is_sequence() || n.size() == 0) n.fail("a non-empty list of names");
  std::vector<std::string> out;
  for (size_t i = 0; i < n.size(); ++i) out.push_back(n[i].as_string());
  return out;
}

LoraData read_lora_data() {
  const YNode root = YNode::load_file(data_root() / "data" / "lora.yaml");
  root.allow_only({"defaults", "target_modules", "nf4_bytes_per_parameter"});
  LoraData data;
  data.nf4_bytes = root.at("nf4_bytes_per_parameter").as_positive_number();
  const YNode d = root.at("defaults");
  d.allow_only({"rank", "alpha", "dropout", "adapter_dtype"});
  data.defaults.rank = d.at("rank").as_int(1, 1 << 20);
  data.defaults.alpha = d.at("alpha").as_positive_number();
  data.defaults.dropout = d.at("dropout").as_number();
  data.defaults.adapter_dtype = parse_dtype(d.at("adapter_dtype"));
  const YNode t = root.at("target_modules");
  t.allow_only({"llama", "gpt2", "bert"});
  for (const std::string& family : t.keys()) data.target_modules[family] = string_list(t.at(family));
  return data;
}

const LoraData& lora_data() {
  static const ReadOnce<LoraData> data(read_lora_data);
  return data.get();
}

// A key whose value names the scenario's setting: its line where given, else the nearest given ancestor's.
const YNode& key_or(const std::optional<YNode>& key, const YNode& fallback) { return key ? *key : fallback; }

// The layers lora.target_modules names (PEFT's "all-linear": every linear layer but the output layer, PEFT's
// INCLUDE_LINEAR_LAYERS_SHORTHAND): each name must match one, and the rank must fit each one's shape.
void check_targets(const YNode& where, const Scenario& s, const std::vector<Op>& ops, const std::optional<YNode>& rank,
                   const std::optional<YNode>& list) {
  const Lora& l = s.training.lora;
  const auto names = linear_module_names(ops);
  for (size_t i = 0; i < l.target_modules.size(); ++i) {
    const auto matched = linear_ops_named(ops, l.target_modules[i]);
    if (matched.empty())
      (list && list->is_sequence() ? (*list)[i] : where)
          .fail(fmt::format("{} has no linear layer named \"{}\" (its linear layers: {})", s.model.name,
                            l.target_modules[i], fmt::join(names, ", ")));
    for (const Op* op : matched) {
      const GemmShape& g = op->gemms.front();
      if (l.rank > std::min(g.k, g.n))
        key_or(rank, where)
            .fail(fmt::format("rank {} exceeds {}'s dimensions ({} in, {} out): the adapter would not be low-rank",
                              l.rank, op->name, g.k, g.n));
    }
  }
}

void parse_lora(const YNode& root, const YNode& trainable, Scenario& s) {
  Lora& l = s.training.lora;
  l = default_lora(s.model);
  l.target_modules.clear();
  if (!s.model.transformer)
    trainable.fail(
        fmt::format("LoRA adapts a transformer's linear layers; {} is given as explicit layers (use "
                    "frozen_except)",
                    s.model.name));
  const auto block = root.get("lora");
  std::optional<YNode> rank, list;
  if (block) {
    block->allow_only({"rank", "alpha", "target_modules", "dropout", "adapter_dtype", "base_dtype"});
    rank = block->get("rank");
    if (rank) {
      l.rank = rank->as_int(-(1 << 20), 1 << 20);
      if (l.rank < 1) rank->fail(fmt::format("the LoRA rank r must be at least 1, got {}", l.rank));
    }
    if (auto v = block->get("alpha")) l.alpha = v->as_positive_number();
    if (auto v = block->get("dropout")) {
      l.dropout = v->as_number();
      if (l.dropout < 0 || l.dropout >= 1) v->fail(fmt::format("a probability in [0, 1), got {}", l.dropout));
    }
    if (auto v = block->get("adapter_dtype")) l.adapter_dtype = parse_dtype(*v);
    if (auto v = block->get("base_dtype")) {
      const std::string name = v->as_string();
      if (name == "int8")
        v->fail(
            "LLM.int8 base weights (bitsandbytes' Linear8bitLt) are not modelled; give nf4 (QLoRA) or "
            "training.param_dtype");
      if (name == "nf4" && s.parallelism.sharding != Sharding::none)
        v->fail(fmt::format("QLoRA's nf4 base with {} is not modelled (DDP is)", s.parallelism.sharding_as_written));
      if (name == "nf4") l.quantized_base_bytes = lora_data().nf4_bytes;
      if (name != "nf4" && parse_dtype(*v) != s.training.param_dtype)
        v->fail(fmt::format("the frozen base is stored in training.param_dtype ({}); give that or leave base_dtype out",
                            to_string(s.training.param_dtype)));
    }
    list = block->get("target_modules");
  }
  // torch/distributed/fsdp/_flat_param.py _validate_tensors_to_flatten: "Must flatten tensors with uniform dtype".
  const bool fsdp = s.parallelism.sharding == Sharding::zero2 || s.parallelism.sharding == Sharding::zero3;
  if (fsdp && l.adapter_dtype != s.training.param_dtype)
    (block && block->has("adapter_dtype") ? block->at("adapter_dtype") : trainable)
        .fail(fmt::format("FSDP flattens each unit's tensors into one FlatParameter of one dtype (\"Must flatten "
                          "tensors with uniform dtype\"): give lora.adapter_dtype {} (training.param_dtype), not {}",
                          to_string(s.training.param_dtype), to_string(l.adapter_dtype)));
  const auto ops = build_ops(s.model, 1, Dtype::bf16);
  if (list && list->is_scalar() && list->as_string() == "all-linear") {
    for (const std::string& name : linear_module_names(ops))
      if (name != "lm_head") l.target_modules.push_back(name);
  } else if (list) {
    l.target_modules = string_list(*list);
  } else {
    l.target_modules = default_lora(s.model).target_modules;
  }
  check_targets(block ? *block : trainable, s, ops, rank, list);
}

void parse_frozen_except(const YNode& training, const YNode& trainable, Scenario& s) {
  const auto v = training.get("frozen_except");
  if (!v) trainable.fail("frozen_except needs training.frozen_except: the patterns of the parameters that train");
  s.training.frozen_except = string_list(*v);
  const auto groups = parameter_breakdown(s.model);
  for (size_t i = 0; i < s.training.frozen_except.size(); ++i) {
    const std::string& pattern = s.training.frozen_except[i];
    const bool any =
        std::any_of(groups.begin(), groups.end(), [&](const ParameterGroup& g) { return glob_match(pattern, g.name); });
    if (!any)
      (*v)[i].fail(
          fmt::format("\"{}\" matches no parameter of {} (names as `dpsim inspect model` prints them, e.g. "
                      "{}; * and ? are wildcards)",
                      pattern, s.model.name, groups.empty() ? "" : groups.back().name));
  }
}

}  // namespace

Lora default_lora(const ModelSpec& model) {
  const LoraData& data = lora_data();
  Lora l = data.defaults;
  if (model.transformer) l.target_modules = data.target_modules.at(family_name(model.transformer->family));
  return l;
}

void parse_trainable(const YNode& root, Scenario& s) {
  const YNode training = root.at("training");
  Training& t = s.training;
  const auto key = training.get("trainable");
  if (key)
    t.trainable = key->as_enum<Trainable>(
        {{"all", Trainable::all}, {"lora", Trainable::lora}, {"frozen_except", Trainable::frozen_except}});
  if (auto v = root.get("lora"); v && t.trainable != Trainable::lora)
    v->fail("LoRA's settings apply to training.trainable: lora");
  if (auto v = training.get("frozen_except"); v && t.trainable != Trainable::frozen_except)
    v->fail("the trainable patterns apply to training.trainable: frozen_except");
  if (t.trainable == Trainable::all) return;
  const char* unmodelled = s.parallelism.tensor > 1     ? "tensor parallelism"
                           : s.parallelism.pipeline > 1 ? "pipeline parallelism"
                           : s.zero_optimization        ? "DeepSpeed's zero_optimization"
                                                        : nullptr;
  if (unmodelled)
    key->fail(
        fmt::format("{} with {} is not modelled (DDP and FSDP's sharding are)", to_string(t.trainable), unmodelled));
  if (t.trainable == Trainable::lora)
    parse_lora(root, *key, s);
  else
    parse_frozen_except(training, *key, s);
}

}  // namespace dpsim
