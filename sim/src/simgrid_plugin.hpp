#pragma once
// SimGrid's engine lives in a plugin (libdpsim-simgrid.so, simgrid_engine.cpp) that a process loads only when a step
// lays flows (step fidelity, or calls that share links: engine_for() in step.cpp), so that no other process maps
// SimGrid's libraries. The plugin gets the platform as plain data and needs nothing of this program's code
// (engine.hpp is inline); it is linked with --no-undefined.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine.hpp"

namespace dpsim::sim {

class Platform;

// The platform as the plugin lays it: the same hosts and links in the same order, routes from Platform::route().
struct SimgridPlatformSpec {
  std::vector<std::string> hosts;          // network hosts, by index
  std::vector<ComputeHost> compute_hosts;  // by timeline
  std::vector<std::string> duplex_links;   // link 2k (up) and 2k + 1 (down) of duplex link k
  std::vector<double> duplex_bytes_per_s;  // [k]
  std::function<void(int, int, std::vector<int>&)> route;
};

// The plugin's one entry point: a new SimGrid engine (one per process) with the platform laid.
using SimgridEngineFactory = StepEngine* (*)(const SimgridPlatformSpec*);
inline constexpr const char* kSimgridEngineSymbol = "dpsim_simgrid_engine";
inline constexpr const char* kSimgridPluginFile = "libdpsim-simgrid.so";

// Loads the plugin (once per process) and makes its engine for `platform`. Where it looks, in order: the file
// $DPSIM_SIMGRID_PLUGIN names (only there, when set); beside the running executable; ../lib/dpsim from it (an
// install); the build tree and the install prefix this binary was built for. A RuntimeError names every place looked
// at when none holds it, or what the loader said when it did not load.
std::unique_ptr<StepEngine> make_simgrid_engine(const Platform& platform);

}  // namespace dpsim::sim
