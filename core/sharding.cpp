#include "dpsim/sharding.hpp"

#include <algorithm>
#include <cctype>

namespace dpsim {

ModelStateParts model_state_parts(Dtype param_dtype, Dtype grad_dtype, Optimizer optimizer) {
  // An fp32 master copy when weights are 16-bit, plus the fp32 moments: Adam's m and v, SGD's momentum.
  const double master = dtype_bytes(param_dtype) < 4 ? 4.0 : 0.0;
  const double moments = optimizer == Optimizer::adamw ? 8.0 : optimizer == Optimizer::sgd_momentum ? 4.0 : 0.0;
  return {static_cast<double>(dtype_bytes(param_dtype)), static_cast<double>(dtype_bytes(grad_dtype)),
          master + moments};
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

std::string fsdp_unit_of(const std::string& name) {
  size_t start = 0;
  while (start <= name.size()) {
    const size_t end = std::min(name.find('.', start), name.size());
    const bool numeric = end > start && std::all_of(name.begin() + static_cast<std::ptrdiff_t>(start),
                                                    name.begin() + static_cast<std::ptrdiff_t>(end),
                                                    [](unsigned char c) { return std::isdigit(c) != 0; });
    if (numeric) return name.substr(0, end);
    start = end + 1;
  }
  return "";
}

}  // namespace dpsim
