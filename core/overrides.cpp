// Scenario overrides and sweep files (YAML, so they live in core).
#include <fmt/format.h>

#include "dpsim/error.hpp"
#include "dpsim/load.hpp"
#include "dpsim/sweep_spec.hpp"
#include "load_internal.hpp"

namespace dpsim {

namespace fs = std::filesystem;

double SweepSpec::point_count() const {
  if (axes.empty()) return 1;
  if (mode == SweepMode::zip) return static_cast<double>(axes.front().values.size());
  double n = 1;
  for (const auto& a : axes) n *= static_cast<double>(a.values.size());
  return n;
}

namespace {

std::string to_yaml_text(const YNode& n) {
  if (n.is_scalar()) return n.as_string();
  n.fail("a sweep value must be a single value (number, size, name)");
}

}  // namespace

SweepSpec load_sweep(const fs::path& file) {
  const YNode root = YNode::load_file(file);
  root.allow_only({"name", "description", "base", "mode", "command", "axes"});
  SweepSpec s;
  s.file = file.string();
  s.name = root.has("name") ? root.at("name").as_string() : file.stem().string();
  const YNode base = root.at("base");
  const fs::path dir = file.parent_path().empty() ? fs::path(".") : file.parent_path();
  s.base = fs::path(base.as_string()).is_absolute() ? fs::path(base.as_string()) : dir / base.as_string();
  std::error_code ec;
  if (!fs::exists(s.base, ec)) base.fail(fmt::format("base scenario {} does not exist", s.base.string()));
  if (auto m = root.get("mode")) s.mode = m->as_enum<SweepMode>({{"grid", SweepMode::grid}, {"zip", SweepMode::zip}});
  if (auto c = root.get("command"))
    s.command = c->as_enum<std::string>({{"predict", "predict"}, {"estimate", "estimate"}});
  const YNode axes = root.at("axes");
  axes.require_map();
  for (const auto& key : axes.keys()) {
    const YNode values = axes.at(key);
    SweepAxis axis{key, {}};
    if (values.size() == 0) values.fail("an axis needs at least one value");
    for (size_t i = 0; i < values.size(); ++i) axis.values.push_back(to_yaml_text(values[i]));
    if (s.mode == SweepMode::zip && !s.axes.empty() && axis.values.size() != s.axes.front().values.size()) {
      values.fail(fmt::format("zipped axes need equal lengths: {} has {} values, {} has {}", key, axis.values.size(),
                              s.axes.front().key_path, s.axes.front().values.size()));
    }
    s.axes.push_back(std::move(axis));
  }
  if (s.axes.empty()) axes.fail("a sweep needs at least one axis");
  const double count = s.point_count();
  if (count > kMaxSweepPoints) {
    axes.fail(fmt::format("the sweep has {:.0f} points; dpsim refuses more than {:.0f} (split it, or zip axes)", count,
                          kMaxSweepPoints));
  }
  return s;
}

std::vector<Override> sweep_point(const SweepSpec& sweep, int64_t index) {
  std::vector<Override> out;
  if (sweep.mode == SweepMode::zip) {
    for (const auto& a : sweep.axes) out.push_back({a.key_path, a.values[static_cast<size_t>(index)]});
    return out;
  }
  std::vector<size_t> digits(sweep.axes.size());
  for (size_t i = sweep.axes.size(); i-- > 0;) {
    const auto n = static_cast<int64_t>(sweep.axes[i].values.size());
    digits[i] = static_cast<size_t>(index % n);
    index /= n;
  }
  for (size_t i = 0; i < sweep.axes.size(); ++i)
    out.push_back({sweep.axes[i].key_path, sweep.axes[i].values[digits[i]]});
  return out;
}

}  // namespace dpsim
