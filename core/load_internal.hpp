#pragma once
// Private to core's loaders.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "dpsim/error.hpp"
#include "dpsim/scenario.hpp"
#include "yaml_node.hpp"

namespace dpsim {

void validate_topology(const Topology& topology, const std::function<void(const std::string&)>& fail);
ModelSpec parse_model_node(const YNode& node, const std::filesystem::path& base_dir);

// A collective algorithm named by a YAML value (with_auto: "auto" too) or key, from the algorithm registry.
Algorithm algorithm_value(const YNode& n, bool with_auto);
Algorithm algorithm_key(const YNode& parent, const std::string& key);

// An error about `file` as a whole (missing, a directory, a device, too large, unreadable) rethrown at the key
// that named the file: "x.yaml:7: cluster.topology: /dev/zero: file is more than ...". An error at a line inside
// `file` is rethrown unchanged.
[[noreturn]] void rethrow_at_key(const YNode& key, const std::filesystem::path& file, const InputError& error);

// Model dimensions: an integer in [1, 2^24].
int64_t model_dim(const YNode& n);
// The dimensions every Hugging Face-named transformer block states (vocab_size, hidden_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads (default: the heads), intermediate_size), read into `c`.
void read_hf_dims(const YNode& n, TransformerConfig& c);
// Heads divide the hidden size (unless head_dim is explicit) and key/value heads divide the heads.
void check_heads(const TransformerConfig& c, const YNode& n);
// A Hugging Face config.json (load_hf_config.cpp).
TransformerConfig parse_hf_config(const YNode& n);

// One optimizer step over one parameter: data/optimizers.yaml (counted from PyTorch's source; the file says how).
struct OptimizerPasses {
  double state = 0;    // passes over an fp32 tensor
  double grad = 0;     // passes over the gradient
  double kernels = 0;  // launches per parameter group (foreach, fused) or per tensor (forloop)
};

// data/optimizers.yaml's row for this optimizer and implementation, read once (core/load_optimizers.cpp).
OptimizerPasses optimizer_passes(Optimizer optimizer, OptimizerImpl impl);
// The file optimizer_passes reads: data/optimizers.yaml.
std::filesystem::path optimizers_file();

// bf16 | fp16 | fp32 (core/load_scenario.cpp).
Dtype parse_dtype(const YNode& n);
// training.trainable, training.frozen_except and the lora: block, checked against the model and the parallelism the
// scenario has already read (core/load_trainable.cpp).
void parse_trainable(const YNode& root, Scenario& s);

}  // namespace dpsim
