#pragma once
// NCCL tuner plugins (data/tuner_plugins.yaml): a platform's own algorithm and protocol choice, which NCCL takes
// instead of its own. Today: aws-ofi-nccl's region tuner on AWS p5 (EFA), named by a topology's
// network.tuner_plugin.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dpsim/collective_kind.hpp"
#include "dpsim/scenario.hpp"

namespace dpsim {

struct TunerPoint {
  double bytes = 0;
  double ranks = 0;
};

// One region: the (bytes, ranks) polygon where the plugin picks this algorithm and protocol.
struct TunerRegion {
  Algorithm algorithm = Algorithm::ring;
  Protocol protocol = Protocol::simple;
  std::vector<TunerPoint> vertices;
};

struct TunerPlugin {
  std::string name;
  std::string source;
  TunerPoint max;         // the plugin's TUNER_MAX_SIZE, TUNER_MAX_RANKS: the ray casting's far corner
  int min_nodes = 1;      // fewer nodes: NCCL's own tuner
  int gpus_per_node = 0;  // the ranks per node the table is for (others: NCCL's own)
  std::map<CollectiveKind, std::vector<TunerRegion>> regions;  // looked up in order
};

struct TunerChoice {
  Algorithm algorithm = Algorithm::ring;
  Protocol protocol = Protocol::simple;
};

// data/tuner_plugins.yaml's entry `name` (the file is read once), or null where it has none; and every name.
std::shared_ptr<const TunerPlugin> find_tuner_plugin(const std::string& name);
std::vector<std::string> tuner_plugin_names();

// Whether `p` lies inside `region` or on its edge.
bool in_tuner_region(const TunerPoint& p, const TunerRegion& region, const TunerPoint& max);

// The plugin's choice for one call on `nodes` x `gpus_per_node` ranks, or nullopt where it leaves the call to NCCL's
// tuner (too few nodes, another GPU count per node, no region holds it). NVLSTree regions are skipped without NVLS.
std::optional<TunerChoice> tuner_plugin_choice(const TunerPlugin& plugin, CollectiveKind kind, double bytes, int nodes,
                                               int gpus_per_node, bool nvls);

}  // namespace dpsim
