#include "set_option.hpp"

#include <fmt/format.h>

#include "dpsim/error.hpp"

namespace dpsim::app {

void add_set_option(CLI::App* cmd, std::vector<std::string>& sets) {
  cmd->add_option("--set", sets,
                  "Override a scenario key, as a sweep axis does (repeatable): --set cluster.nodes=4 "
                  "--set ddp.bucket_cap=50MiB")
      ->type_name("KEY=VALUE")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

std::vector<Override> parse_sets(const std::vector<std::string>& sets) {
  std::vector<Override> out;
  for (const auto& text : sets) {
    const auto eq = text.find('=');
    if (eq == std::string::npos || eq == 0)
      throw InputError(
          fmt::format("--set {}: expected KEY=VALUE with a scenario key path (e.g. --set cluster.nodes=4)", text));
    out.push_back({text.substr(0, eq), text.substr(eq + 1)});
  }
  return out;
}

namespace {

// Key path a is b or lies under it.
bool under(const std::string& a, const std::string& b) { return !b.empty() && (a == b || a.starts_with(b + ".")); }

}  // namespace

Scenario load_scenario_set(const std::string& file, const std::vector<Override>& overrides) {
  try {
    return load_scenario(file, overrides);
  } catch (const InputError& e) {
    for (const auto& o : overrides) {
      const std::string set = fmt::format("--set {}={}", o.key_path, o.value);
      // The value itself is wrong: it came from the command line, so no file line to name.
      if (under(e.key_path(), o.key_path)) throw InputError(set, 0, e.key_path(), e.message());
      // A check of the section it sits in (cluster size vs topology): both places matter.
      if (under(o.key_path, e.key_path())) throw InputError(fmt::format("{}: {}", set, e.what()));
    }
    throw;
  }
}

void record_overrides(const std::vector<Override>& overrides, StepResult& r) {
  if (overrides.empty()) return;
  auto& list = r.context["overrides"] = nlohmann::json::array();
  for (const auto& o : overrides) list.push_back(o.key_path + "=" + o.value);
}

}  // namespace dpsim::app
