// Loading of models: models/*.yaml (transformer config or explicit layer list), inline mappings in a
// scenario, and Hugging Face config.json files (JSON is YAML; their fields are read in load_hf_config.cpp).
#include <map>

#include <fmt/format.h>

#include "dpsim/error.hpp"
#include "dpsim/load.hpp"
#include "dpsim/model.hpp"
#include "dpsim/units.hpp"
#include "load_internal.hpp"

namespace dpsim {

namespace fs = std::filesystem;

namespace {
constexpr int64_t kMaxDim = int64_t{1} << 24;
}  // namespace

int64_t model_dim(const YNode& n) { return n.as_int(1, kMaxDim); }

void check_heads(const TransformerConfig& c, const YNode& n) {
  if (c.head_dim == 0 && c.hidden_size % c.num_heads != 0) {
    n.fail(fmt::format("hidden size {} is not a multiple of the {} attention heads", c.hidden_size, c.num_heads));
  }
  if (c.num_kv_heads > c.num_heads || c.num_heads % c.num_kv_heads != 0) {
    n.fail(fmt::format("{} key/value heads must divide the {} attention heads", c.num_kv_heads, c.num_heads));
  }
}

namespace {

// Each dimension alone is bounded, but their products are not: 100,000 layers of 2^24-wide matrices would
// overflow the 64-bit parameter count (and every byte count derived from it). The largest models are ~1e12.
constexpr double kMaxParameters = 1e15;
// A layer's forward FLOPs per sample: a 1e15-parameter layer at 2 FLOPs per parameter per token over 2^24
// tokens is ~3e22; anything above is a typo, and its seconds would print as a 300-digit number.
constexpr double kMaxLayerFlops = 1e24;

ModelFamily parse_family(const YNode& n) {
  return n.as_enum<ModelFamily>(
      {{"llama", ModelFamily::llama}, {"gpt2", ModelFamily::gpt2}, {"bert", ModelFamily::bert}});
}

// position_embedding_type (absolute | alibi) and embedding_layernorm: gpt2 only (BLOOM's variants).
void parse_gpt2_variants(const YNode& n, TransformerConfig& c) {
  const auto gpt2_only = [&](const YNode& v) {
    if (c.family != ModelFamily::gpt2)
      v.fail("a gpt2 variant (BLOOM's); not for model_type " + n.at("model_type").as_string());
  };
  if (auto v = n.get("position_embedding_type")) {
    gpt2_only(*v);
    c.alibi = v->as_enum<bool>({{"absolute", false}, {"alibi", true}});
    if (c.alibi && n.has("max_position_embeddings"))
      n.at("max_position_embeddings")
          .fail("ALiBi (position_embedding_type: alibi) has no position table; remove max_position_embeddings");
  }
  if (auto v = n.get("embedding_layernorm")) {
    gpt2_only(*v);
    c.embedding_norm = v->as_bool();
  }
}

// Our own transformer block: Hugging Face key names, only the keys we use.
TransformerConfig parse_transformer(const YNode& n) {
  n.allow_only({"model_type", "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "intermediate_size", "max_position_embeddings", "tie_word_embeddings",
                "type_vocab_size", "hidden_dropout", "attention_dropout", "position_embedding_type",
                "embedding_layernorm", "separate_output_bias"});
  TransformerConfig c;
  c.family = parse_family(n.at("model_type"));
  read_hf_dims(n, c);
  if (auto v = n.get("max_position_embeddings")) c.max_position_embeddings = model_dim(*v);
  if (auto v = n.get("tie_word_embeddings")) c.tie_embeddings = v->as_bool();
  if (auto v = n.get("type_vocab_size")) {
    c.type_vocab_size = v->as_int(0, kMaxDim);
    if (c.family != ModelFamily::bert)
      v->fail(fmt::format("token-type embeddings are bert's; a {} model has none", n.at("model_type").as_string()));
  }
  for (auto [key, p] : {std::pair{"hidden_dropout", &c.hidden_dropout}, {"attention_dropout", &c.attention_dropout}})
    if (auto v = n.get(key)) {
      *p = v->as_number();
      if (!(*p >= 0 && *p < 1)) v->fail(fmt::format("a dropout probability is in [0, 1), got {}", *p));
    }
  parse_gpt2_variants(n, c);
  if (auto v = n.get("separate_output_bias")) {
    c.separate_output_bias = v->as_bool();
    if (c.family == ModelFamily::llama)
      v->fail(
          "gpt2 and bert only (Megatron-LM 2019's RowParallelLinear); a llama model's output projections are "
          "unbiased unless attention_bias / mlp_bias say");
  }
  if (c.family != ModelFamily::llama && c.max_position_embeddings == 0 && !c.alibi) {
    n.fail("gpt2 and bert models need max_position_embeddings (learned position embeddings)");
  }
  check_heads(c, n);
  return c;
}

// tensors: [{name, shape}] of an imported layer (python/dpsim/import_torch.py): their elements add up to the layer's
// parameters.
std::vector<LayerTensor> parse_tensors(const YNode& n, int64_t parameters) {
  std::vector<LayerTensor> tensors;
  double total = 0;
  for (size_t i = 0; i < n.size(); ++i) {
    const YNode t = n[i];
    t.allow_only({"name", "shape"});
    LayerTensor tensor;
    tensor.name = t.at("name").as_string();
    if (tensor.name.empty()) t.at("name").fail("expected a tensor name");
    const YNode shape = t.at("shape");
    tensor.numel = 1;
    for (size_t k = 0; k < shape.size(); ++k) {
      tensor.shape.push_back(shape[k].as_int(1, int64_t{1} << 40));
      if (static_cast<double>(tensor.numel) * static_cast<double>(tensor.shape.back()) > kMaxParameters)
        shape[k].fail(fmt::format("the tensor has more than {} elements", format_count(kMaxParameters)));
      tensor.numel *= tensor.shape.back();
    }
    total += static_cast<double>(tensor.numel);
    tensors.push_back(std::move(tensor));
  }
  if (total != static_cast<double>(parameters))
    n.fail(fmt::format("the tensors hold {} elements, but the layer states {} parameters", format_count(total),
                       format_count(static_cast<double>(parameters))));
  return tensors;
}

std::vector<ExplicitLayer> parse_layers(const YNode& n) {
  std::vector<ExplicitLayer> layers;
  if (n.size() == 0) n.fail("a layer list needs at least one layer");
  for (size_t i = 0; i < n.size(); ++i) {
    const YNode l = n[i];
    l.allow_only({"name", "parameters", "tensors", "forward_flops_per_sample", "gemm", "memory",
                  "activation_elements_per_sample", "convolution"});
    ExplicitLayer layer;
    layer.name = l.at("name").as_string();
    layer.parameters = l.at("parameters").as_int(0, int64_t{1} << 50);
    if (auto t = l.get("tensors")) layer.tensors = parse_tensors(*t, layer.parameters);
    layer.forward_flops_per_sample = l.at("forward_flops_per_sample").as_number();
    if (layer.forward_flops_per_sample < 0) l.at("forward_flops_per_sample").fail("must not be negative");
    if (layer.forward_flops_per_sample > kMaxLayerFlops)
      l.at("forward_flops_per_sample")
          .fail(fmt::format("{:.3g} FLOPs per sample is above the {:.0g} dpsim handles for one layer",
                            layer.forward_flops_per_sample, kMaxLayerFlops));
    if (auto g = l.get("gemm")) {
      g->allow_only({"m", "n", "k", "batch"});
      layer.gemm = GemmShape{model_dim(g->at("m")), model_dim(g->at("n")), model_dim(g->at("k")),
                             g->has("batch") ? model_dim(g->at("batch")) : 1};
    }
    if (auto a = l.get("activation_elements_per_sample")) {
      layer.activation_elements_per_sample = a->as_number();
      if (!(layer.activation_elements_per_sample >= 0 && layer.activation_elements_per_sample <= kMaxLayerFlops))
        a->fail("must be between 0 and 1e24 elements");
    }
    if (auto m = l.get("memory")) {
      m->allow_only({"elements_per_sample", "forward_passes", "backward_passes"});
      layer.memory_elements_per_sample = m->at("elements_per_sample").as_positive_number();
      layer.forward_passes = m->at("forward_passes").as_number();
      layer.backward_passes = m->at("backward_passes").as_number();
      for (const char* key : {"forward_passes", "backward_passes"}) {
        const double v = m->at(key).as_number();
        if (!(v >= 0 && v <= 100)) m->at(key).fail("must be between 0 and 100 passes");
      }
    }
    if (auto c = l.get("convolution"); c && c->as_bool()) {
      if (!layer.gemm || layer.memory_elements_per_sample <= 0)
        c->fail("a convolution needs its implicit GEMM (gemm) and its feature maps (memory.elements_per_sample)");
      layer.convolution = true;
    }
    layers.push_back(std::move(layer));
  }
  return layers;
}

// gradient_ready_order: every tensor of the layers, once, in the order autograd made its gradient ready.
std::vector<std::string> parse_ready_order(const YNode& n, const std::vector<ExplicitLayer>& layers) {
  std::map<std::string, bool> seen;  // tensor name -> listed yet
  for (const auto& l : layers) {
    if (l.parameters > 0 && l.tensors.empty())
      n.fail(fmt::format("layer {} has parameters but no tensors: list; the order names tensors", l.name));
    for (const auto& t : l.tensors)
      if (!seen.emplace(t.name, false).second) n.fail(fmt::format("tensor {} is in two layers", t.name));
  }
  std::vector<std::string> order;
  for (size_t i = 0; i < n.size(); ++i) {
    std::string name = n[i].as_string();
    auto it = seen.find(name);
    if (it == seen.end()) n[i].fail(fmt::format("no layer has a tensor named {}", name));
    if (it->second) n[i].fail(fmt::format("tensor {} is listed twice", name));
    it->second = true;
    order.push_back(std::move(name));
  }
  for (const auto& [name, listed] : seen)
    if (!listed) n.fail(fmt::format("tensor {} is missing (every tensor's gradient becomes ready once)", name));
  return order;
}

// input: what one sample is (descriptive: dpsim counts samples, and tokens from training.sequence_length).
void check_input(const YNode& n) {
  n.allow_only({"samples_unit", "tokens_per_sample"});
  if (auto v = n.get("samples_unit"); v && v->as_string().empty()) v->fail("expected a name (image, sequence, ...)");
  if (auto v = n.get("tokens_per_sample")) v->as_int(1, kMaxDim);
}

ModelSpec parse_model_map_unchecked(const YNode& n, const std::string& fallback_name) {
  ModelSpec m;
  m.file = n.file();
  if (n.has("transformer") || n.has("layers")) {
    n.allow_only({"name", "source", "transformer", "layers", "input", "parameters", "gradient_ready_order"});
    m.name = n.has("name") ? n.at("name").as_string() : fallback_name;
    if (n.has("transformer") && n.has("layers")) n.fail("give either transformer or layers, not both");
    if (auto v = n.get("source")) v->as_string();
    if (auto v = n.get("input")) check_input(*v);
    if (auto t = n.get("transformer")) m.transformer = parse_transformer(*t);
    if (auto l = n.get("layers")) m.layers = parse_layers(*l);
    if (auto g = n.get("gradient_ready_order")) {
      if (!n.has("layers")) g->fail("a gradient order names the tensors of a layers: list");
      m.gradient_ready_order = parse_ready_order(*g, m.layers);
    }
    return m;
  }
  if (n.has("model_type") || n.has("hidden_size") || n.has("n_embd") || n.has("d_model")) {
    m.name = fallback_name;
    m.transformer = parse_hf_config(n);
    return m;
  }
  n.fail("a model needs a transformer: block, a layers: list, or Hugging Face config.json keys");
}

ModelSpec parse_model_map(const YNode& n, const std::string& fallback_name) {
  ModelSpec m = parse_model_map_unchecked(n, fallback_name);
  double parameters = 0;  // in double: the sum must not overflow before it is checked
  for (const auto& op : build_ops(m, 1, Dtype::bf16)) {
    for (const auto& p : op.params) parameters += static_cast<double>(p.numel);
  }
  if (parameters > kMaxParameters) {
    n.fail(fmt::format("the model has {} parameters; dpsim handles at most {}", format_count(parameters),
                       format_count(kMaxParameters)));
  }
  // parameters: the count the model's source states, checked against the layers or the transformer's shapes.
  if (auto v = n.get("parameters"); v && (n.has("layers") || n.has("transformer"))) {
    const int64_t stated = v->as_int(1, static_cast<int64_t>(kMaxParameters));
    if (static_cast<double>(stated) != parameters)
      v->fail(fmt::format("states {} parameters, but the model has {}", format_count(static_cast<double>(stated)),
                          format_count(parameters)));
  }
  return m;
}

}  // namespace

ModelSpec load_model(const fs::path& file) {
  const YNode root = YNode::load_file(file);
  return parse_model_map(root, file.stem().string());
}

ModelSpec parse_model_node(const YNode& node, const fs::path& base_dir) {
  if (node.is_scalar()) {
    const fs::path p(node.as_string());
    if (p.empty()) node.fail("expected a model file (models/*.yaml or a config.json) or a model mapping");
    const fs::path file = p.is_absolute() ? p : base_dir / p;
    std::error_code ec;
    if (!fs::exists(file, ec)) node.fail(fmt::format("model file {} does not exist", file.string()));
    try {
      return load_model(file);
    } catch (const InputError& e) {
      rethrow_at_key(node, file, e);
    }
  }
  return parse_model_map(node, "inline model");
}

}  // namespace dpsim
