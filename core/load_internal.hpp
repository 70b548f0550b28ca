#pragma once
// Private to core's loaders.
#include <filesystem>
#include <functional>
#include <string>

#include "dpsim/scenario.hpp"
#include "yaml_node.hpp"

namespace dpsim {

void validate_topology(const Topology& topology, const std::function<void(const std::string&)>& fail);
ModelSpec parse_model_node(const YNode& node, const std::filesystem::path& base_dir);

}  // namespace dpsim
