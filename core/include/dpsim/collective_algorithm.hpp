#pragma once
// The collective algorithms dpsim models, one descriptor each (core/algorithms/<name>.cpp), listed once in the
// registry (core/collective_algorithms.cpp). A descriptor is everything any layer needs of its algorithm: its
// scenario/data name, NCCL_ALGO name and description, where NCCL runs it, its alpha-beta cost (constants in
// data/nccl.yaml), and the flows it moves over the simulator's hosts (the simulator hands them to SimGrid).
// Adding an algorithm touches 5 places: the Algorithm value (scenario.hpp), its descriptor file (and the CMake source
// list), its two lines in the registry (collective_algorithms.cpp), its constants in data/nccl.yaml. Parsers,
// messages, the CLI, the cost model's choice, the simulator's flows and the backend's NCCL_ALGO read the registry.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dpsim/collective_kind.hpp"
#include "dpsim/cost.hpp"

namespace dpsim {

// One message stream of a collective: `bytes` per payload byte (flows) or per call (the simulator scales them).
struct Flow {
  int src = 0;  // host indices of the FlowSpace
  int dst = 0;
  double bytes = 0;
};

// The endpoints a collective's flows run between: the simulator's platform, or one process group's view of it.
//   gpu(node, local)  a GPU (only for the first simulated_nodes() nodes: see sim/src/platform.hpp, `reduced`);
//   nvswitch(node)    the NVSwitch as the reducing endpoint of NVLS;
//   channel(node, c)  where inter-node channel c leaves node `node` (its NIC).
class FlowSpace {
 public:
  // The intra-node ring as NCCL spreads it over the node's links: directed GPU edges (from -> to, local indices)
  // with the share of a GPU's ring traffic each carries.
  struct Edge {
    int from = 0, to = 0;
    double share = 1;
  };
  virtual ~FlowSpace() = default;
  virtual int nodes() const = 0;
  virtual int gpus_per_node() const = 0;
  virtual int simulated_nodes() const = 0;
  virtual int channels() const = 0;          // inter-node channels simulated per node
  virtual double channel_share() const = 0;  // fraction of the inter-node data each simulated channel carries
  virtual int gpu(int node, int local) const = 0;
  virtual int nvswitch(int node) const = 0;
  virtual int channel(int node, int c) const = 0;
  virtual const std::vector<Edge>& intra_ring_edges() const = 0;
  int world() const { return nodes() * gpus_per_node(); }
};

// A call as the step fidelity cuts it into NCCL's steps: its kind, payload (nccl-tests' S), protocol and the GPUs'
// architecture (NCCL's NVLS channel count depends on it).
struct StepCall {
  CollectiveKind kind = CollectiveKind::all_reduce;
  double bytes = 0;
  Protocol protocol = Protocol::simple;
  Arch arch = Arch::hopper;
};

// An algorithm's cost for one (kind, bytes, protocol): ok = false where NCCL does not run it so.
struct AlgorithmCost {
  bool ok = false;
  double latency_s = 0;
  double time_s = 0;
  double fill_s = 0;
  // What NCCL's own tuning model believes the call takes, which is what it chooses the algorithm by; 0: time_s.
  // It differs where NCCL's model leaves out what the wire does (the two-node tree's halved network traffic).
  double tuner_time_s = 0;
};

struct AlgorithmDescriptor {
  Algorithm id = Algorithm::ring;
  const char* name = "";       // scenario `collective.algorithm`, data/nccl.yaml keys, results
  const char* nccl_algo = "";  // NCCL_ALGO value the backend sets (NCCL src/graph/tuning.cc ncclAlgoStr)
  const char* description = "";
  bool (*runs)(CollectiveKind kind) = nullptr;
  // Why NCCL does not enable it on this fabric (one sentence for messages); empty where it does. The cost below
  // also returns ok = false where it does not run.
  std::string (*unavailable)(const FabricSummary& fabric, const NcclModel& nccl) = nullptr;
  AlgorithmCost (*cost)(CollectiveKind kind, double bytes, Protocol protocol, const FabricSummary& fabric,
                        const NcclModel& nccl) = nullptr;
  // Fast fidelity: every flow of one call at once, per payload byte.
  std::vector<Flow> (*flows)(const FlowSpace& space, CollectiveKind kind) = nullptr;
  // Step fidelity: the call as NCCL's steps, synchronized rounds each moving one chunk over every edge of flows():
  // round = flows() / steps(), so every edge carries its whole share over the call (step_round below). The ring's
  // steps are its 2(n-1) or n-1 hops of S/n; the tree's and the NVLS family's NCCL's chunks (data/nccl.yaml
  // step_chunks).
  int (*steps)(const FlowSpace& space, const StepCall& call, const NcclModel& nccl) = nullptr;
  // A CollNet algorithm (the network's switches reduce): NCCL's own choice weighs it only with NCCL_COLLNET_ENABLE=1
  // (scenario collective.collnet); a scenario may still name it.
  bool in_network = false;
};

// One step of `call` on `space`: the descriptor's flows for one payload byte, scaled by 1 / its steps.
std::vector<Flow> step_round(const AlgorithmDescriptor& algorithm, const FlowSpace& space, const StepCall& call,
                             const NcclModel& nccl);

// Every registered algorithm, in NCCL's order (ring, tree, nvls, ...); the order the cost model tries them in.
const std::vector<const AlgorithmDescriptor*>& collective_algorithms();
const AlgorithmDescriptor& algorithm_descriptor(Algorithm algorithm);  // RuntimeError for Algorithm::automatic
// "ring, tree or nvls": the registered names for messages; with_auto prefixes "auto, ".
std::string algorithm_names(bool with_auto);
std::vector<std::string> algorithm_name_list(bool with_auto);
// Whether NCCL runs `algorithm` for `kind` on this fabric (the one availability rule of every layer).
bool algorithm_available(Algorithm algorithm, CollectiveKind kind, const FabricSummary& fabric, const NcclModel& nccl);
// Why not, for messages: empty where it runs.
std::string algorithm_unavailable_reason(Algorithm algorithm, CollectiveKind kind, const FabricSummary& fabric,
                                         const NcclModel& nccl);

}  // namespace dpsim
