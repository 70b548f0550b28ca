#pragma once
// YAML loading: the only code in the project that sees yaml-cpp. Every error is an InputError
// naming file, line and key path.
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "dpsim/scenario.hpp"

namespace dpsim {

// Where data/, topologies/ and models/ live: $DPSIM_DATA_DIR, else the source tree, else the install prefix.
std::filesystem::path data_root();

Scenario load_scenario(const std::filesystem::path& file);

// Loads `scenario` (errors are ignored: each later load reports them) and keeps the YAML parse of every file it
// read, for this process and the processes it forks: a later load of one of those files, while its text is still
// the same, shares the kept parse instead of parsing and checking the file again, as often as it is loaded, except
// a load that changes the nodes (a scenario with overrides), which parses its own. It keeps
// data/optimizers.yaml too, which every point's step plan reads. A sweep's
// parent calls it before forking its workers: every point reads its files, and parses only those it overrides.
// It reads regular files only: one that is not (a FIFO could block) ends it, and the points read that file.
void keep_parsed_files_of(const std::filesystem::path& scenario);
Topology load_topology(const std::filesystem::path& file);
ModelSpec load_model(const std::filesystem::path& file);  // models/*.yaml or a Hugging Face config.json
GpuSpec load_gpu(const std::string& key);                 // data/gpus/KEY.yaml with data/gpus.yaml's kernels
std::vector<GpuSpec> load_gpu_catalog();                  // every GPU of data/gpus/, sorted by key
std::filesystem::path gpu_catalog_dir();                  // data/gpus/: one KEY.yaml per GPU
NcclModel load_nccl(const std::filesystem::path& file);
// PEFT's LoraConfig defaults for a transformer `model` (data/lora.yaml): rank, alpha, the family's target modules.
Lora default_lora(const ModelSpec& model);

// The topology on `nodes` nodes of its first `gpus_per_node` GPUs (keep_first_gpus), checked (at most 2^20
// GPUs, every GPU reachable, NICs for multi-node); `fail` reports what is wrong and must throw.
Topology sized_topology(Topology topology, int nodes, int gpus_per_node,
                        const std::function<void(const std::string&)>& fail);

// The topology file that a shipped name ("h100-8x-nvswitch") or a path (relative to `dir`) names. A name that is
// not shipped, or a path that does not exist, is an InputError that says so (and lists the shipped names).
std::filesystem::path find_topology(const std::string& name_or_path, const std::filesystem::path& dir);

// Resolve a topology by name ("h100-8x-nvswitch") or path, relative to a scenario file.
std::filesystem::path resolve_topology(const std::string& name_or_path, const std::filesystem::path& scenario_dir);

}  // namespace dpsim
