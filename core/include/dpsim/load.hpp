#pragma once
// YAML loading: the only code in the project that sees yaml-cpp. Every error is an InputError
// naming file, line and key path.
#include <filesystem>
#include <string>

#include "dpsim/scenario.hpp"

namespace dpsim {

// Where data/, topologies/ and models/ live: $DPSIM_DATA_DIR, else the source tree, else the install prefix.
std::filesystem::path data_root();

Scenario load_scenario(const std::filesystem::path& file);
Topology load_topology(const std::filesystem::path& file);
ModelSpec load_model(const std::filesystem::path& file);  // models/*.yaml or a Hugging Face config.json
GpuSpec load_gpu(const std::string& key);                 // from data/gpus.yaml
NcclModel load_nccl(const std::filesystem::path& file);

// The topology on `nodes` nodes of its first `gpus_per_node` GPUs (keep_first_gpus), checked as a scenario's
// cluster block is; errors are InputErrors starting with `what` (the option or key that asked for the size).
Topology sized_topology(Topology topology, int nodes, int gpus_per_node, const std::string& what);

// The names of the shipped topologies (topologies/*.yaml), comma-separated, for error messages.
std::string shipped_topologies();

// Resolve a topology by name ("h100-8x-nvswitch") or path, relative to a scenario file.
std::filesystem::path resolve_topology(const std::string& name_or_path, const std::filesystem::path& scenario_dir);

}  // namespace dpsim
