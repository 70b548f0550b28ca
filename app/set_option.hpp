#pragma once
// --set KEY=VALUE on predict, estimate and validate: the override code sweep axes use (core/overrides.cpp), so a
// value is checked exactly as the same value written in the scenario file.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "dpsim/result.hpp"
#include "dpsim/sweep_spec.hpp"

namespace dpsim::app {

void add_set_option(CLI::App* cmd, std::vector<std::string>& sets);

// "cluster.nodes=4" -> {cluster.nodes, 4}; throws InputError naming --set for text without KEY=.
std::vector<Override> parse_sets(const std::vector<std::string>& sets);

// load_scenario with the overrides; an error in an overridden key says "--set KEY=VALUE: KEY: message".
Scenario load_scenario_set(const std::string& file, const std::vector<Override>& overrides);

// context.overrides: ["cluster.nodes=4", ...] in command-line order (nothing when there are none).
void record_overrides(const std::vector<Override>& overrides, StepResult& result);

}  // namespace dpsim::app
