// Predicted vs measured, phase by phase and collective by collective; the shared error statistics.
#include "dpsim/validation/compare.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "dpsim/units.hpp"

namespace dpsim::validation {

double relative_error(double predicted, double measured) {
  if (measured == 0) return predicted == 0 ? 0.0 : std::copysign(std::numeric_limits<double>::infinity(), predicted);
  return (predicted - measured) / std::fabs(measured);
}

double relative_error_to_range(double predicted, double low, double high) {
  if (low > high) std::swap(low, high);
  if (predicted >= low && predicted <= high) return 0.0;
  return predicted < low ? relative_error(predicted, low) : relative_error(predicted, high);
}

ErrorStats error_stats(const std::vector<double>& relative_errors) {
  ErrorStats s;
  std::vector<double> a;
  for (double e : relative_errors) {
    a.push_back(std::fabs(e));
    s.mean_signed += e;
  }
  s.count = static_cast<int>(a.size());
  if (a.empty()) return s;
  s.mean_signed /= static_cast<double>(a.size());
  std::sort(a.begin(), a.end());
  const size_t n = a.size();
  s.median_abs = n % 2 ? a[n / 2] : 0.5 * (a[n / 2 - 1] + a[n / 2]);
  s.worst_abs = a.back();
  return s;
}

std::string percent(double r) {
  if (!std::isfinite(r)) return r > 0 ? "+inf" : "-inf";
  return fmt::format("{:+.1f}%", 100.0 * r);
}

std::string text_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], r[i].size());
    }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

namespace {

CompareRow row(const std::string& name, double p, double m, double floor_s, double tolerance) {
  CompareRow r;
  r.name = name;
  r.predicted = p;
  r.measured = m;
  r.abs_error = p - m;
  r.rel_error = relative_error(p, m);
  const double denom = std::max(std::fabs(m), floor_s);
  r.judged_error = denom > 0 ? std::fabs(p - m) / denom : (p == m ? 0.0 : std::numeric_limits<double>::infinity());
  r.within = r.judged_error <= tolerance + 1e-12;
  return r;
}

std::optional<double> context_tolerance(const nlohmann::json& context) {
  if (!context.is_object()) return std::nullopt;
  for (const char* key : {"tolerance", "validation_tolerance"})
    if (context.contains(key) && context[key].is_number()) return context[key].get<double>();
  if (context.contains("validation") && context["validation"].is_object() &&
      context["validation"].contains("tolerance") && context["validation"]["tolerance"].is_number())
    return context["validation"]["tolerance"].get<double>();
  return std::nullopt;
}

// Results without comm[] (schema 1): the DDP buckets in launch order. False when the counts differ.
bool compare_buckets(const StepResult& p, const StepResult& m, Comparison& c) {
  const size_t n = std::min(p.buckets.size(), m.buckets.size());
  if (p.buckets.size() != m.buckets.size())
    c.notes.push_back(fmt::format("bucket count differs: predicted {}, measured {}; the first {} are compared",
                                  p.buckets.size(), m.buckets.size(), n));
  for (size_t i = 0; i < n; ++i) {
    const auto& a = p.buckets[i];
    const auto& b = m.buckets[i];
    if (a.bytes != b.bytes)
      c.notes.push_back(fmt::format("bucket {} bytes differ: predicted {}, measured {}", i, a.bytes, b.bytes));
    c.buckets.push_back(row(fmt::format("bucket {} start", b.index), a.start_s, b.start_s, c.floor_s, c.tolerance));
    c.buckets.push_back(row(fmt::format("bucket {} duration", b.index), a.end_s - a.start_s, b.end_s - b.start_s,
                            c.floor_s, c.tolerance));
  }
  return p.buckets.size() == m.buckets.size();
}

std::string comm_name(const CommTiming& t) {
  std::string kind = t.kind;
  std::replace(kind.begin(), kind.end(), '_', '-');
  return fmt::format("{} {} {}", kind, t.group, t.index);
}

// Schema 2: every collective matched by (kind, group, index), whatever the order streams finished them in. False
// when a call of one side has no match on the other.
bool compare_comms(const StepResult& p, const StepResult& m, Comparison& c) {
  using Key = std::tuple<std::string, std::string, int>;
  std::map<Key, const CommTiming*> measured;
  for (const CommTiming& t : m.comm) measured[{t.kind, t.group, t.index}] = &t;
  bool all = true;
  for (const CommTiming& a : p.comm) {
    const auto it = measured.find({a.kind, a.group, a.index});
    if (it == measured.end()) {
      c.notes.push_back(fmt::format("{}: predicted, not measured", comm_name(a)));
      all = false;
      continue;
    }
    const CommTiming& b = *it->second;
    measured.erase(it);
    if (a.bytes != b.bytes)
      c.notes.push_back(fmt::format("{}: bytes differ: predicted {}, measured {}", comm_name(a), a.bytes, b.bytes));
    c.comms.push_back(row(comm_name(a) + " start", a.start_s, b.start_s, c.floor_s, c.tolerance));
    c.comms.push_back(
        row(comm_name(a) + " duration", a.end_s - a.start_s, b.end_s - b.start_s, c.floor_s, c.tolerance));
  }
  for (const auto& [key, t] : measured) {
    c.notes.push_back(fmt::format("{}: measured, not predicted", comm_name(*t)));
    all = false;
  }
  return all;
}

}  // namespace

double pick_tolerance(std::optional<double> explicit_tolerance, const StepResult& predicted, const StepResult& measured,
                      std::optional<double> scenario_tolerance, std::string* from) {
  auto said = [&](const char* where, double t) {
    if (from) *from = where;
    return t;
  };
  if (explicit_tolerance) return said("--tolerance", *explicit_tolerance);
  if (auto t = context_tolerance(measured.context)) return said("measured context", *t);
  if (auto t = context_tolerance(predicted.context)) return said("predicted context", *t);
  if (scenario_tolerance) return said("scenario validation.tolerance", *scenario_tolerance);
  return said("default", 0.10);
}

Comparison compare(const StepResult& p, const StepResult& m, double tolerance) {
  Comparison c;
  c.scenario = m.scenario.empty() ? p.scenario : m.scenario;
  c.tolerance = tolerance;
  c.floor_s = 0.05 * m.step_time_s;
  if (p.scenario != m.scenario)
    c.notes.push_back(fmt::format("scenario names differ: predicted \"{}\", measured \"{}\"", p.scenario, m.scenario));
  const int pw = p.context.value("world_size", 0), mw = m.context.value("gpu_count", m.context.value("world_size", 0));
  if (pw > 0 && mw > 0 && pw != mw)
    c.notes.push_back(fmt::format("world size differs: predicted {}, measured {}", pw, mw));
  c.phases.push_back(row("forward", p.forward_s, m.forward_s, c.floor_s, tolerance));
  c.phases.push_back(row("backward", p.backward_s, m.backward_s, c.floor_s, tolerance));
  c.phases.push_back(row("exposed communication", p.exposed_comm_s, m.exposed_comm_s, c.floor_s, tolerance));
  c.phases.push_back(row("optimizer", p.optimizer_s, m.optimizer_s, c.floor_s, tolerance));
  c.phases.push_back(row("step", p.step_time_s, m.step_time_s, c.floor_s, tolerance));
  c.pass = !p.comm.empty() && !m.comm.empty() ? compare_comms(p, m, c) : compare_buckets(p, m, c);
  for (const auto* rows : {&c.phases, &c.buckets, &c.comms})
    for (const auto& r : *rows) c.pass = c.pass && r.within;
  return c;
}

std::string render_comparison(const Comparison& c) {
  auto table = [&](const std::vector<CompareRow>& rows, const char* first) {
    std::vector<std::vector<std::string>> t{
        {first, "predicted", "measured", "abs error", "rel error", "judged", "verdict"}};
    for (const auto& r : rows)
      t.push_back({r.name, format_seconds(r.predicted), format_seconds(r.measured),
                   (r.abs_error >= 0 ? "+" : "-") + format_seconds(std::fabs(r.abs_error)), percent(r.rel_error),
                   fmt::format("{:.1f}%", 100 * r.judged_error), r.within ? "ok" : "OUTSIDE"});
    return text_table(t);
  };
  std::string out = fmt::format(
      "Validation of {}: tolerance {:.1f}% ({}); small rows judged against {} (5% of the measured step)\n\n",
      c.scenario, 100 * c.tolerance, c.tolerance_from.empty() ? "given" : c.tolerance_from, format_seconds(c.floor_s));
  out += "Phases\n" + table(c.phases, "phase") + "\n";
  if (!c.buckets.empty()) out += "Buckets (launch order)\n" + table(c.buckets, "bucket") + "\n";
  if (!c.comms.empty())
    out += "Collectives (matched by kind, group and index in issue order)\n" + table(c.comms, "collective") + "\n";
  for (const auto& n : c.notes) out += "note: " + n + "\n";
  int outside = 0;
  for (const auto* rows : {&c.phases, &c.buckets, &c.comms})
    for (const auto& r : *rows) outside += r.within ? 0 : 1;
  out += c.pass ? "Verdict: PASS (every row within tolerance)\n"
                : fmt::format("Verdict: FAIL ({} row{} outside tolerance{})\n", outside, outside == 1 ? "" : "s",
                              c.notes.empty() ? "" : "; see notes");
  return out;
}

}  // namespace dpsim::validation
