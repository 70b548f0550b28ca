// Loading SimGrid's engine from its plugin (simgrid_plugin.hpp).
#include "simgrid_plugin.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "dpsim/error.hpp"
#include "platform.hpp"

namespace dpsim::sim {

namespace {

std::string executable_dir() {  // as app/helper.cpp finds its helpers
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "" : self.parent_path().string();
}

// Where make_simgrid_engine() looks, in its order (simgrid_plugin.hpp).
std::vector<std::string> simgrid_plugin_candidates() {
  if (const char* set = std::getenv("DPSIM_SIMGRID_PLUGIN"); set && *set) return {set};
  std::vector<std::string> out;
  const std::string dir = executable_dir();
  if (!dir.empty()) {
    out.push_back(dir + "/" + kSimgridPluginFile);
    out.push_back(dir + "/../lib/dpsim/" + kSimgridPluginFile);
  }
  for (const char* built : {DPSIM_SIMGRID_PLUGIN_BUILD, DPSIM_SIMGRID_PLUGIN_INSTALL})
    if (std::find(out.begin(), out.end(), built) == out.end()) out.push_back(built);
  return out;
}

SimgridEngineFactory load_factory() {
  const std::vector<std::string> candidates = simgrid_plugin_candidates();
  for (const std::string& path : candidates) {
    if (!std::filesystem::exists(path)) continue;
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) throw RuntimeError(fmt::format("simulator: cannot load SimGrid's engine {}: {}", path, ::dlerror()));
    void* entry = ::dlsym(handle, kSimgridEngineSymbol);
    if (!entry)
      throw RuntimeError(
          fmt::format("simulator: {} has no {} (a plugin of another dpsim build?)", path, kSimgridEngineSymbol));
    return reinterpret_cast<SimgridEngineFactory>(entry);
  }
  throw RuntimeError(fmt::format(
      "simulator: this step lays flows, which run on SimGrid's engine, and its plugin {} was not found (looked for: "
      "{}): build dpsim whole (cmake --build build), install it (cmake --install build), or name the file in "
      "DPSIM_SIMGRID_PLUGIN",
      kSimgridPluginFile, fmt::join(candidates, ", ")));
}

}  // namespace

std::unique_ptr<StepEngine> make_simgrid_engine(const Platform& platform) {
  static const SimgridEngineFactory factory = load_factory();
  SimgridPlatformSpec spec;
  spec.hosts = platform.host_names();
  spec.compute_hosts = platform.compute_hosts();
  spec.duplex_links = platform.duplex_link_names();
  const std::vector<double>& capacities = platform.link_capacities();
  for (size_t k = 0; k < spec.duplex_links.size(); ++k) spec.duplex_bytes_per_s.push_back(capacities[2 * k]);
  spec.route = [&platform](int src, int dst, std::vector<int>& out) { platform.route(src, dst, out); };
  return std::unique_ptr<StepEngine>(factory(&spec));
}

}  // namespace dpsim::sim
