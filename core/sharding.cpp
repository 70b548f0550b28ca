#include "dpsim/sharding.hpp"

#include <algorithm>
#include <cctype>

namespace dpsim {

namespace {
// The moments an optimizer keeps per parameter: Adam's m and v, SGD's momentum buffer.
double optimizer_moments(Optimizer optimizer) {
  return optimizer == Optimizer::adamw ? 2.0 : optimizer == Optimizer::sgd_momentum ? 1.0 : 0.0;
}
}  // namespace

bool keeps_fp32_master(Dtype weights, bool master_weights) { return master_weights && dtype_bytes(weights) < 4; }

const char* unsharded_memory_label(int pipeline_stages) {
  return pipeline_stages > 1 ? "the stage's weights and gradients in full" : "units gathered at once";
}

ModelStateParts model_state_parts(Dtype param_dtype, Dtype grad_dtype, Optimizer optimizer, bool master_weights) {
  // An fp32 master copy when weights are 16-bit, plus the moments (Adam's m and v, SGD's momentum) in fp32; without
  // the master (pure 16-bit training) the moments are in the weights' dtype.
  const bool master = keeps_fp32_master(param_dtype, master_weights);
  const double state = master ? 4.0 : static_cast<double>(dtype_bytes(param_dtype));
  const double moments = state * optimizer_moments(optimizer);
  return {static_cast<double>(dtype_bytes(param_dtype)), static_cast<double>(dtype_bytes(grad_dtype)),
          (master ? 4.0 : 0.0) + moments};
}

double sharded_model_state_bytes(double parameters, const ModelStateParts& p, Sharding sharding, int shards) {
  const double n = std::max(1, shards);
  switch (sharding) {
    case Sharding::none: return parameters * p.total();
    case Sharding::zero1: return parameters * (p.weights + p.grads + p.optimizer / n);
    case Sharding::zero2: return parameters * (p.weights + (p.grads + p.optimizer) / n);
    case Sharding::zero3: return parameters * p.total() / n;
  }
  return parameters * p.total();
}

namespace {
// The end of the first numeric component of `name` (the block index), or npos.
size_t block_end(const std::string& name, size_t* index_start = nullptr) {
  size_t start = 0;
  while (start <= name.size()) {
    const size_t end = std::min(name.find('.', start), name.size());
    const bool numeric = end > start && std::all_of(name.begin() + static_cast<std::ptrdiff_t>(start),
                                                    name.begin() + static_cast<std::ptrdiff_t>(end),
                                                    [](unsigned char c) { return std::isdigit(c) != 0; });
    if (numeric) {
      if (index_start) *index_start = start;
      return end;
    }
    start = end + 1;
  }
  return std::string::npos;
}
}  // namespace

std::string fsdp_wrapped_unit_of(const std::string& name, int wrap_blocks, const std::string& wrap_module) {
  size_t index_start = 0;
  const size_t end = block_end(name, &index_start);
  if (end == std::string::npos) return "";
  if (!wrap_module.empty()) {
    if (end >= name.size()) return "";
    const std::string inner = "." + name.substr(end + 1) + ".";
    const size_t at = inner.find("." + wrap_module + ".");
    return at == std::string::npos ? "" : name.substr(0, end + at + wrap_module.size() + 1);
  }
  if (wrap_blocks <= 1) return name.substr(0, end);
  const long index = std::stol(name.substr(index_start, end - index_start));
  return name.substr(0, index_start) + std::to_string(index / wrap_blocks * wrap_blocks);
}

std::string fsdp_unit_of(const std::string& name) {
  const size_t end = block_end(name);
  return end == std::string::npos ? "" : name.substr(0, end);
}

}  // namespace dpsim
