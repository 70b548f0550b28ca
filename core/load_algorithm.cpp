// Algorithm names in YAML (scenario `collective.algorithm`, data/nccl.yaml keys, calibration fits), read against
// the algorithm registry.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dpsim/collective_algorithm.hpp"
#include "load_internal.hpp"

namespace dpsim {

Algorithm algorithm_value(const YNode& n, bool with_auto) {
  const std::string value = n.as_string();
  const auto a = algorithm_named(value);
  if (!a || (!with_auto && *a == Algorithm::automatic))
    n.fail(fmt::format("\"{}\" is not one of: {}", value, fmt::join(algorithm_name_list(with_auto), ", ")));
  return *a;
}

Algorithm algorithm_key(const YNode& parent, const std::string& key) {
  const auto a = algorithm_named(key);
  if (!a || *a == Algorithm::automatic)
    parent.fail(fmt::format("unknown algorithm \"{}\" (expected {})", key, algorithm_names(false)));
  return *a;
}

}  // namespace dpsim
