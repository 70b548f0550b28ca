#include "dpsim/trainable.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace dpsim {

bool names_module(const std::string& op_name, const std::string& module) {
  return op_name == module || (op_name.size() > module.size() && op_name.ends_with("." + module));
}

bool glob_match(const std::string& pattern, const std::string& name) {
  // Iterative wildcard match: on a mismatch, let the last `*` swallow one more character.
  size_t p = 0, n = 0, star = std::string::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p, ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (star != std::string::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool is_linear(const Op& op) {
  return op.kind == OpKind::matmul && !op.params.empty() && op.gemms.size() == 1 && op.gemms.front().batch == 1;
}

std::vector<const Op*> linear_ops_named(const std::vector<Op>& ops, const std::string& module) {
  std::vector<const Op*> out;
  for (const Op& op : ops)
    if (is_linear(op) && names_module(op.name, module)) out.push_back(&op);
  return out;
}

std::vector<std::string> linear_module_names(const std::vector<Op>& ops) {
  std::set<std::string> names;
  for (const Op& op : ops)
    if (is_linear(op)) names.insert(op.name.substr(op.name.rfind('.') + 1));
  return {names.begin(), names.end()};
}

TrainableDtypes trainable_dtypes(const Training& t) {
  if (t.trainable == Trainable::lora) return {t.lora.adapter_dtype, t.lora.adapter_dtype};
  return {t.param_dtype, t.grad_dtype};
}

std::string optimizer_state_label(const Training& t) {
  const Dtype weights = trainable_dtypes(t).weights;
  if (t.master_weights || dtype_bytes(weights) >= 4) return to_string(t.optimizer);
  return std::string(to_string(t.optimizer)) + " in " + to_string(weights) + ", no fp32 master";
}

namespace {

constexpr const char* kDropout = ".lora_dropout";
constexpr const char* kA = ".lora_A";

bool is_adapter(const Op& op) { return op.name.ends_with(kA) || op.name.ends_with(".lora_B"); }

// QLoRA: bitsandbytes quantizes every linear layer of the base but the output layer.
bool quantized(const Training& t, const Op& op) {
  return t.trainable == Trainable::lora && t.lora.quantized_base_bytes > 0 && is_linear(op) && op.name != "lm_head" &&
         !is_adapter(op);
}

// QLoRA's dequantization of a layer's stored weight into param_dtype before each use (data/lora.yaml): read the
// stored bytes, write the weight; once per micro-step forward, again in the backward where dX is wanted.
Op dequantize(const Op& base, const Training& t, double act_bytes) {
  int64_t numel = 0;
  for (const ParamTensor& p : base.params) numel += p.numel;
  Op d;
  d.name = base.name + ".dequantize";
  d.kind = OpKind::elementwise;
  const double bytes = static_cast<double>(numel) * (t.lora.quantized_base_bytes + act_bytes);
  d.forward_bytes_per_sample = bytes / static_cast<double>(t.micro_batch);  // per micro-batch, not per sample
  d.backward_bytes_per_sample = d.forward_bytes_per_sample;
  return d;
}

// The adapter of linear layer `base` (PEFT layer.py: lora_A = nn.Linear(in_features, r, bias=False), lora_B =
// nn.Linear(r, out_features); forward `result + lora_B(lora_A(dropout(x))) * scaling`), per sample.
void add_adapter(std::vector<Op>& out, const Op& base, const Lora& lora, double act_bytes) {
  const GemmShape& g = base.gemms.front();  // {tokens, out_features, in_features}
  const auto tokens = static_cast<double>(g.m), in = static_cast<double>(g.k), features = static_cast<double>(g.n);
  const auto r = static_cast<double>(lora.rank);
  if (lora.dropout > 0) {  // nn.Dropout: reads x, writes the result and a one-byte mask it keeps; backward the same
    Op d;
    d.name = base.name + kDropout;
    d.kind = OpKind::elementwise;
    d.forward_bytes_per_sample = tokens * in * (2.0 * act_bytes + 1.0);
    d.backward_bytes_per_sample = d.forward_bytes_per_sample;
    d.activation_bytes_per_sample = tokens * in;
    out.push_back(std::move(d));
  }
  Op a;
  a.name = base.name + kA;
  a.params.push_back({a.name + ".weight", lora.rank * g.k, true});
  a.forward_flops_per_sample = 2.0 * tokens * in * r;
  a.gemms.push_back({g.m, lora.rank, g.k, 1});
  // Its input for dW: the dropout's own output, or x, which the base layer's run keeps (see keep_run_inputs).
  a.activation_bytes_per_sample = lora.dropout > 0 ? tokens * in * act_bytes : 0.0;
  out.push_back(std::move(a));
  Op b;
  b.name = base.name + ".lora_B";
  b.params.push_back({b.name + ".weight", g.n * lora.rank, true});
  b.forward_flops_per_sample = 2.0 * tokens * r * features;
  b.gemms.push_back({g.m, g.n, lora.rank, 1});
  b.activation_bytes_per_sample = tokens * r * act_bytes;  // lora_A's output, for lora_B's dW
  out.push_back(std::move(b));
  // `* scaling` (read, write) then `result + ...` (read two, write one); backward, the scaling of the gradient that
  // reaches lora_B (read, write): the add passes its gradient on as it is.
  Op add;
  add.name = base.name + ".lora_scale_add";
  add.kind = OpKind::elementwise;
  add.forward_bytes_per_sample = 5.0 * tokens * features * act_bytes;
  add.backward_bytes_per_sample = 2.0 * tokens * features * act_bytes;
  out.push_back(std::move(add));
}

// LoRA: the adapters of a run of linear layers (q, k, v read one input; gate and up another) go after the run, so
// that each frozen layer's place in the order says what precedes it.
std::vector<Op> with_adapters(std::vector<Op> ops, const Training& t, double act_bytes) {
  const Lora& lora = t.lora;
  std::vector<Op> out;
  std::vector<const Op*> pending;
  auto flush = [&] {
    for (const Op* base : pending) add_adapter(out, *base, lora, act_bytes);
    pending.clear();
  };
  std::vector<Op> base = std::move(ops);
  for (Op& op : base)
    for (ParamTensor& p : op.params) p.trainable = false;
  out.reserve(base.size() * 2);
  for (size_t i = 0; i < base.size(); ++i) {
    if (!is_linear(base[i])) flush();
    if (is_linear(base[i]) && (i == 0 || !is_linear(base[i - 1])))  // a run begins: its layers' dequantizations
      for (size_t j = i; j < base.size() && is_linear(base[j]); ++j)
        if (quantized(t, base[j])) out.push_back(dequantize(base[j], t, act_bytes));
    out.push_back(base[i]);
    if (!is_linear(base[i])) continue;
    const bool targeted = std::any_of(lora.target_modules.begin(), lora.target_modules.end(),
                                      [&](const std::string& m) { return names_module(base[i].name, m); });
    if (targeted) pending.push_back(&base[i]);
  }
  flush();
  return out;
}

bool trains(const Op& op) {
  return std::any_of(op.params.begin(), op.params.end(), [](const ParamTensor& p) { return p.trainable; });
}

// What each backward computes: dX where a tensor before the op trains (an adapter's input where its layer's input
// needs one: the same tensor), dW where its weight trains (a tied head: where the embedding's does).
void mark_gradients(std::vector<Op>& ops) {
  bool embedding_trains = false;
  for (const Op& op : ops)
    if (op.kind == OpKind::embedding && !op.params.empty()) embedding_trains = op.params.front().trainable;
  std::map<std::string, bool> input_grad_of;
  bool seen = false;
  for (Op& op : ops) {
    bool input = seen && op.kind != OpKind::embedding;  // an embedding's input is token ids
    for (const char* suffix : {kDropout, kA}) {
      if (!op.name.ends_with(suffix)) continue;
      const auto it = input_grad_of.find(op.name.substr(0, op.name.size() - std::string(suffix).size()));
      if (it != input_grad_of.end()) input = it->second;
    }
    op.input_grad = input;
    op.weight_grad = op.params.empty() ? op.kind == OpKind::matmul && embedding_trains : trains(op);
    input_grad_of[op.name] = input;
    seen = seen || op.weight_grad;
  }
}

// A frozen linear layer's backward needs its weight, not its input: a run of layers reading one input keeps it only
// where one of them trains its weight, or an adapter without dropout reads it (the builder books it on the run's
// first layer).
void keep_run_inputs(std::vector<Op>& ops) {
  std::set<std::string> read_by_adapter;
  for (const Op& op : ops)
    if (op.name.ends_with(kA) && op.activation_bytes_per_sample == 0)
      read_by_adapter.insert(op.name.substr(0, op.name.size() - std::string(kA).size()));
  for (size_t i = 0; i < ops.size();) {
    size_t end = i;
    bool keep = false;
    while (end < ops.size() && is_linear(ops[end]) && !is_adapter(ops[end])) {
      keep = keep || ops[end].weight_grad || read_by_adapter.count(ops[end].name) > 0;
      ++end;
    }
    if (end == i) {
      ++i;
      continue;
    }
    if (!keep)
      for (size_t j = i; j < end; ++j) ops[j].activation_bytes_per_sample = 0;
    i = end;
  }
}

// The backward's work as mark_gradients left it: a GEMM's dX and dW are each its forward's FLOPs; attention's
// gradients all flow to its input; memory-bound ops run while either gradient is wanted. Outside the autograd graph
// an op runs no backward and keeps nothing.
void cut_backward(std::vector<Op>& ops) {
  for (Op& op : ops) {
    const bool any = op.input_grad || op.weight_grad;
    switch (op.kind) {
      case OpKind::matmul:
        op.backward_flops_per_sample =
            op.forward_flops_per_sample * ((op.input_grad ? 1.0 : 0.0) + (op.weight_grad ? 1.0 : 0.0));
        if (!any) op.backward_bytes_per_sample = 0;
        break;
      case OpKind::attention:
        if (!op.input_grad) op.backward_flops_per_sample = 0, op.backward_bytes_per_sample = 0;
        break;
      case OpKind::elementwise:
      case OpKind::embedding:
        if (!any) op.backward_bytes_per_sample = 0, op.backward_fixed_bytes = 0;
        break;
    }
    // Outside the graph nothing is kept; a linear layer's input is keep_run_inputs' (an adapter may read it).
    if (!any && !is_linear(op)) op.activation_bytes_per_sample = 0;
  }
}

}  // namespace

std::vector<Op> finetune_ops(std::vector<Op> ops, const Training& t, double act_bytes) {
  switch (t.trainable) {
    case Trainable::all: return ops;
    case Trainable::lora: ops = with_adapters(std::move(ops), t, act_bytes); break;
    case Trainable::frozen_except:
      for (Op& op : ops)
        for (ParamTensor& p : op.params)
          p.trainable = std::any_of(t.frozen_except.begin(), t.frozen_except.end(),
                                    [&](const std::string& pattern) { return glob_match(pattern, p.name); });
      break;
  }
  mark_gradients(ops);
  keep_run_inputs(ops);
  cut_backward(ops);
  return ops;
}

double frozen_bytes_per_parameter(const Training& t, const Op& op) {
  return quantized(t, op) ? t.lora.quantized_base_bytes : dtype_bytes(t.param_dtype);
}

}  // namespace dpsim
