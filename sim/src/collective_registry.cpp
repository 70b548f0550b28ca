#include <fmt/format.h>
#include <array>

#include "collective.hpp"
#include "dpsim/error.hpp"

namespace dpsim::sim {

const CollectiveAlgorithm& collective_algorithm(Algorithm algorithm) {
  static const std::array<std::unique_ptr<CollectiveAlgorithm>, 3> registry{make_ring(), make_tree(), make_nvls()};
  for (const auto& a : registry)
    if (a->algorithm() == algorithm) return *a;
  throw RuntimeError(fmt::format("simulator: no collective algorithm registered for '{}'", to_string(algorithm)));
}

}  // namespace dpsim::sim
