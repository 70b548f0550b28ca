// The registry of collective algorithms: the one list every layer reads their names, availability, costs and
// flows from (see dpsim/collective_algorithm.hpp).
#include <fmt/format.h>

#include "dpsim/collective_algorithm.hpp"
#include "dpsim/error.hpp"

namespace dpsim {

// Registration: one per descriptor file (core/algorithms/<name>.cpp).
const AlgorithmDescriptor& ring_algorithm();
const AlgorithmDescriptor& tree_algorithm();
const AlgorithmDescriptor& nvls_algorithm();
const AlgorithmDescriptor& nvlstree_algorithm();
const AlgorithmDescriptor& collnet_chain_algorithm();

const std::vector<const AlgorithmDescriptor*>& collective_algorithms() {
  static const std::vector<const AlgorithmDescriptor*> registry{&ring_algorithm(), &tree_algorithm(), &nvls_algorithm(),
                                                                &nvlstree_algorithm(), &collnet_chain_algorithm()};
  return registry;
}

const AlgorithmDescriptor& algorithm_descriptor(Algorithm algorithm) {
  for (const AlgorithmDescriptor* d : collective_algorithms())
    if (d->id == algorithm) return *d;
  throw RuntimeError(fmt::format("no collective algorithm registered for '{}'", to_string(algorithm)));
}

std::vector<Flow> step_round(const AlgorithmDescriptor& algorithm, const FlowSpace& space, const StepCall& call,
                             const NcclModel& nccl) {
  std::vector<Flow> round = algorithm.flows(space, call.kind);
  const double share = 1.0 / algorithm.steps(space, call, nccl);
  for (Flow& f : round) f.bytes *= share;
  return round;
}

std::vector<std::string> algorithm_name_list(bool with_auto) {
  std::vector<std::string> out;
  if (with_auto) out.emplace_back("auto");
  for (const AlgorithmDescriptor* d : collective_algorithms()) out.emplace_back(d->name);
  return out;
}

std::string algorithm_names(bool with_auto) {
  const std::vector<std::string> names = algorithm_name_list(with_auto);
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

std::string algorithm_unavailable_reason(Algorithm algorithm, CollectiveKind kind, const FabricSummary& fabric,
                                         const NcclModel& nccl) {
  const AlgorithmDescriptor& d = algorithm_descriptor(algorithm);
  if (!d.runs(kind)) return fmt::format("dpsim models no {} with {}", to_string(kind), d.nccl_algo);
  return d.unavailable(fabric, nccl);
}

bool algorithm_available(Algorithm algorithm, CollectiveKind kind, const FabricSummary& fabric, const NcclModel& nccl) {
  const AlgorithmDescriptor& d = algorithm_descriptor(algorithm);
  return d.runs(kind) && d.unavailable(fabric, nccl).empty();
}

const char* to_string(Algorithm algorithm) {
  if (algorithm == Algorithm::automatic) return "auto";
  for (const AlgorithmDescriptor* d : collective_algorithms())
    if (d->id == algorithm) return d->name;
  return "?";
}

std::optional<Algorithm> algorithm_named(std::string_view name) {
  if (name == "auto") return Algorithm::automatic;
  for (const AlgorithmDescriptor* d : collective_algorithms())
    if (name == d->name) return d->id;
  return std::nullopt;
}

}  // namespace dpsim
