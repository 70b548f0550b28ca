// The _dpsim Python module (import dpsim: python/dpsim/__init__.py wraps it): the functions the CLI's commands call
// (app/cmd_estimate.cpp, app/cmd_predict.cpp), on a scenario file with --set-style overrides; each result is the
// JSON text of `--json`. An InputError becomes dpsim.InputError, carrying file, line and key path.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

#include <fmt/format.h>
#include <utility>
#include <vector>

#include "dpsim/advice.hpp"
#include "dpsim/error.hpp"
#include "dpsim/estimate.hpp"
#include "dpsim/load.hpp"
#include "dpsim/plan.hpp"
#include "dpsim/result.hpp"
#include "dpsim/sim/simulate.hpp"
#include "dpsim/sweep_spec.hpp"
#include "set_option.hpp"

namespace py = pybind11;

namespace dpsim {

namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;  // (key path, YAML value) in the caller's order

std::vector<Override> to_overrides(const Pairs& pairs) {
  std::vector<Override> out;
  for (const auto& [key, value] : pairs) out.push_back({key, value});
  return out;
}

// Runs `body` with the GIL released; an InputError is raised as dpsim.InputError(text, file, line, key_path, message).
template <typename F>
auto guarded(F&& body) {
  try {
    py::gil_scoped_release release;
    return body();
  } catch (const InputError& e) {
    const py::object cls = py::module_::import("dpsim").attr("InputError");
    const py::object exc = cls(e.what(), e.file(), e.line(), e.key_path(), e.message());
    PyErr_SetObject(cls.ptr(), exc.ptr());
    throw py::error_already_set();
  }
}

// dpsim estimate FILE --set ... --json
std::string estimate_json(const std::string& file, const Pairs& sets, bool advice) {
  return guarded([&] {
    const auto overrides = to_overrides(sets);
    const Scenario s = app::load_scenario_set(file, overrides);
    Estimate e = estimate(s, make_step_plan(s));
    app::record_overrides(overrides, e.result);
    if (advice)
      e.result.advice = advise(s, e.result, [](const Scenario& v, const StepPlan& p) { return estimate(v, p).result; });
    return to_json(e.result).dump();
  });
}

// dpsim predict FILE --set ... --fidelity F [--no-overlap] --json (simulate(): the direct engine here, or SimGrid in a
// child process)
std::string predict_json(const std::string& file, const Pairs& sets, const std::string& fidelity, bool overlap,
                         bool advice) {
  return guarded([&] {
    const auto overrides = to_overrides(sets);
    const Scenario s = app::load_scenario_set(file, overrides);
    SimOptions o;
    o.fidelity = parse_fidelity(fidelity);
    o.overlap = overlap;
    o.progress = false;
    o.timeline = false;  // the JSON returned carries no timeline
    StepResult r = simulate(s, make_step_plan(s), o);
    app::record_overrides(overrides, r);
    if (advice) r.advice = advise(s, r, [&o](const Scenario& v, const StepPlan& p) { return simulate(v, p, o); });
    return to_json(r).dump();
  });
}

// Loads and checks the scenario (dpsim.load); returns its name.
std::string check_scenario(const std::string& file, const Pairs& sets) {
  return guarded([&] { return app::load_scenario_set(file, to_overrides(sets)).name; });
}

// The points of a sweep over `axes` (dpsim sweep's expansion, core's sweep_point): each point's overrides.
std::vector<Pairs> sweep_points(const std::vector<std::pair<std::string, std::vector<std::string>>>& axes,
                                const std::string& mode) {
  return guarded([&] {
    SweepSpec spec;
    spec.mode = mode == "zip" ? SweepMode::zip : SweepMode::grid;
    for (const auto& [key, values] : axes) spec.axes.push_back({key, values});
    if (spec.axes.empty()) throw InputError("a sweep needs at least one axis ({key path: [values]})");
    if (spec.mode == SweepMode::zip)
      for (const auto& a : spec.axes)
        if (a.values.size() != spec.axes.front().values.size())
          throw InputError(fmt::format("zip: axis {} has {} values, {} has {}", a.key_path, a.values.size(),
                                       spec.axes.front().key_path, spec.axes.front().values.size()));
    if (spec.point_count() > kMaxSweepPoints)
      throw InputError(fmt::format("{:.0f} points: a sweep has at most {:.0f}", spec.point_count(), kMaxSweepPoints));
    std::vector<Pairs> points;
    for (int64_t i = 0; i < static_cast<int64_t>(spec.point_count()); ++i) {
      Pairs p;
      for (const Override& o : sweep_point(spec, i)) p.emplace_back(o.key_path, o.value);
      points.push_back(std::move(p));
    }
    return points;
  });
}

}  // namespace

}  // namespace dpsim

PYBIND11_MODULE(_dpsim, m) {
  m.doc() = "dpsim's core and simulator (use the dpsim package: python/dpsim/__init__.py)";
  m.def("sweep_points", &dpsim::sweep_points, py::arg("axes"), py::arg("mode"));
  m.def("check_scenario", &dpsim::check_scenario, py::arg("file"), py::arg("overrides"));
  m.def("estimate_json", &dpsim::estimate_json, py::arg("file"), py::arg("overrides"), py::arg("advice"));
  m.def("predict_json", &dpsim::predict_json, py::arg("file"), py::arg("overrides"), py::arg("fidelity"),
        py::arg("overlap"), py::arg("advice"));
}
