// Rendering of a scored reference set: terminal tables, Markdown (validation/reference-errors.md), CSV and a
// gnuplot plot of predicted against published.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "dpsim/error.hpp"
#include "dpsim/result.hpp"
#include "dpsim/units.hpp"
#include "dpsim/validation/compare.hpp"
#include "dpsim/validation/reference.hpp"

namespace dpsim::validation {

namespace fs = std::filesystem;

namespace {
std::string value_text(double v, const std::string& unit) {
  if (unit == "s") return format_seconds(v);
  if (unit == "x") return fmt::format("{:.2f}x", v);
  if (unit == "%") return fmt::format("{:.1f}%", v);
  if (unit != "GB/s") return fmt::format("{:.0f} {}", v, unit);  // samples/s, tokens/s/GPU
  return fmt::format("{:.2f} GB/s", v);
}

// A range's bound with the fewest decimals (at most 4) that give it back: a log's printed 0.03 GB/s, scored as
// 0.025-0.035, reads so and not as 0.024999999999999998-0.034999999999999996.
std::string bound_text(double v) {
  for (int decimals = 0; decimals < 4; ++decimals) {
    const std::string s = fmt::format("{:.{}f}", v, decimals);
    if (std::abs(std::stod(s) - v) <= 1e-9 * std::max(1.0, std::abs(v))) return s;
  }
  return fmt::format("{:.4f}", v);
}

std::string range_text(double low, double high, const std::string& unit) {
  if (unit == "s") return format_seconds(low) + "-" + format_seconds(high);
  if (unit == "x") return fmt::format("{}-{}x", bound_text(low), bound_text(high));
  return fmt::format("{}-{} {}", bound_text(low), bound_text(high), unit);
}

// The report's tables, once, for the terminal and for Markdown.
struct Tables {
  std::vector<std::vector<std::string>> points{
      {"entry", "number", "class", "kind", "predicted", "published", "error", "predicted by"}};
  std::vector<std::vector<std::string>> summary{
      {"class", "kind", "n", "median |error|", "worst |error|", "mean signed"}};
  std::vector<std::vector<std::string>> skipped{{"entry", "file", "reason"}};
};

Tables tables(const ReferenceReport& r) {
  Tables t;
  for (const auto& p : r.points)
    t.points.push_back({p.entry, p.label, p.cls, p.kind, value_text(p.predicted, p.unit),
                        p.published_low != p.published_high ? range_text(p.published_low, p.published_high, p.unit)
                                                            : value_text(p.published, p.unit),
                        percent(p.rel_error), p.predicted_by});
  for (const auto& row : summarize(r))
    t.summary.push_back({row.group, row.kind, std::to_string(row.stats.count),
                         fmt::format("{:.1f}%", 100 * row.stats.median_abs),
                         fmt::format("{:.1f}%", 100 * row.stats.worst_abs), percent(row.stats.mean_signed)});
  for (const auto& x : r.skipped) t.skipped.push_back({x.entry, x.file, x.reason});
  return t;
}

std::vector<std::vector<std::string>> memory_rows(std::vector<RunMemory> runs) {
  std::stable_sort(runs.begin(), runs.end(), [](const RunMemory& a, const RunMemory& b) {
    return a.needed_bytes * b.gpu_bytes > b.needed_bytes * a.gpu_bytes;
  });
  std::vector<std::vector<std::string>> rows{
      {"entry", "number", "published", "needed per GPU", "GPU memory", "share", "fits"}};
  for (const RunMemory& m : runs)
    rows.push_back({m.entry, m.label, m.published_oom ? "out of memory" : "ran", format_bytes(m.needed_bytes),
                    format_bytes(m.gpu_bytes), fmt::format("{:.1f}%", 100 * m.needed_bytes / m.gpu_bytes),
                    m.agrees() ? (m.fits ? "yes" : "no") : (m.fits ? "YES (wrong)" : "NO (wrong)")});
  return rows;
}

std::string target_line(const TargetCheck& c) {
  if (c.points == 0)
    return fmt::format("{}: not judged, no number of this kind was scored (target <= {:.0f}%)", c.what, 100 * c.target);
  return fmt::format("{}: {:.1f}% (target <= {:.0f}%) {}", c.what, 100 * c.value, 100 * c.target,
                     c.met ? "met" : "MISSED");
}

// A GitHub-flavoured Markdown table; "|" in a cell is escaped.
std::string markdown_table(const std::vector<std::vector<std::string>>& rows) {
  std::string out;
  for (size_t i = 0; i < rows.size(); ++i) {
    out += "|";
    for (const auto& cell : rows[i]) {
      std::string c = cell;
      for (size_t at = c.find('|'); at != std::string::npos; at = c.find('|', at + 2)) c.replace(at, 1, "\\|");
      out += " " + c + " |";
    }
    out += "\n";
    if (i == 0) {
      out += "|";
      for (size_t k = 0; k < rows[i].size(); ++k) out += " --- |";
      out += "\n";
    }
  }
  return out;
}
}  // namespace

std::string render_reference(const ReferenceReport& r) {
  const Tables t = tables(r);
  std::string out = fmt::format("Published reference set: {} entries, {} numbers scored, {} skipped\n\n", r.entries,
                                r.points.size(), r.skipped.size());
  out += text_table(t.points) + "\n";
  out += "Errors per interconnect class and kind\n" + text_table(t.summary) + "\n";
  out += "Targets (issues 5, 14, 15, 16 and 17)\n";
  for (const auto& c : check_targets(r)) out += "  " + target_line(c) + "\n";
  for (const RunMemory& m : r.memory)
    if (!m.agrees())
      out += fmt::format("  {} ({}, {}) {}, but dpsim predicts {} per GPU against {}\n", m.entry, m.file, m.label,
                         m.published_oom ? "ran out of memory" : "ran", format_bytes(m.needed_bytes),
                         format_bytes(m.gpu_bytes));
  out += "\nSkipped\n" + text_table(t.skipped);
  return out;
}

std::string reference_markdown(const ReferenceReport& r, const std::string& nccl_version) {
  const Tables t = tables(r);
  std::string out = "# dpsim against the published reference set\n\n";
  out += "Generated by `dpsim validate --reference validation/reference --markdown validation/reference-errors.md`";
  out += " (shipped constants, no calibration; NCCL model " + nccl_version + "). Do not edit: `ctest -L validation`";
  out += " fails when this file is not what the model predicts now.\n\n";
  out += fmt::format("{} entries, {} numbers scored, {} skipped (entries or numbers).\n\n", r.entries, r.points.size(),
                     r.skipped.size());
  out += "## Targets (issues 5, 14, 15, 16 and 17)\n\n";
  for (const auto& c : check_targets(r)) out += "- " + target_line(c) + "\n";
  out += "\n## Memory of the published runs\n\n";
  out +=
      "A configuration published as having run must fit, and one published as running out of GPU memory must not "
      "(issue 15); per GPU, largest share of the GPU's memory first.\n\n";
  out += markdown_table(memory_rows(r.memory));
  out += "\n## Errors per interconnect class and kind\n\n" + markdown_table(t.summary);
  out += "\n## Every scored number\n\n" + markdown_table(t.points);
  out += "\n## Skipped\n\n" + markdown_table(t.skipped);
  return out;
}

std::string reference_csv(const ReferenceReport& r) {
  auto q = [](const std::string& s) {
    std::string o = "\"";
    for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
    return o + "\"";
  };
  std::string out =
      "entry,file,class,kind,label,topology,nodes,gpus_per_node,size_bytes,algorithm,predicted,published,published_low,"
      "published_high,unit,rel_error,predicted_by,note\n";
  for (const auto& p : r.points)
    out += fmt::format("{},{},{},{},{},{},{},{},{:.0f},{},{:.6g},{:.6g},{:.6g},{:.6g},{},{:.6f},{},{}\n", q(p.entry),
                       q(p.file), p.cls, p.kind, q(p.label), q(p.topology), p.nodes, p.gpus_per_node, p.bytes,
                       p.algorithm, p.predicted, p.published, p.published_low, p.published_high, q(p.unit), p.rel_error,
                       q(p.predicted_by), q(p.note));
  for (const auto& s : r.skipped)
    out += fmt::format("{},{},,skipped,,,,,,,,,,,,,,{}\n", q(s.entry), q(s.file), q(s.reason));
  return out;
}

std::string gnuplot_script(const ReferenceReport& r, const fs::path& data, const fs::path& out) {
  const std::string ext = out.extension().string();
  std::string term;
  if (ext == ".svg")
    term = "set terminal svg size 900,700 dynamic enhanced font 'sans,11' background rgb 'white'";
  else if (ext == ".png")
    term = "set terminal pngcairo size 1000,800 enhanced font 'sans,10'";
  else
    throw InputError(fmt::format("--plot {}: the file must end in .png or .svg", out.string()));
  std::set<std::string> classes;
  for (const auto& p : r.points) classes.insert(p.cls);
  std::string s = term + "\n";
  s += fmt::format("set output '{}'\n", out.string());
  s += "set logscale xy\nset format xy \"%g\"\nset grid\nset key top left box opaque\nset size ratio -1\n";
  s += "set title 'dpsim vs published measurements (all-reduce GB/s, times in s, speedups)'\n";
  s += "set xlabel 'published'\nset ylabel 'predicted by dpsim'\n";
  double lo = 1e300, hi = 0;
  for (const auto& p : r.points) {
    lo = std::min({lo, p.published, p.predicted});
    hi = std::max({hi, p.published, p.predicted});
  }
  if (r.points.empty()) lo = 0.1, hi = 10;
  s += fmt::format("set xrange [{:.6g}:{:.6g}]\nset yrange [{:.6g}:{:.6g}]\n", lo / 2, hi * 2, lo / 2, hi * 2);
  s += "set datafile separator ','\n";
  s += "plot x with lines lw 2 lc rgb 'black' title 'y = x', \\\n"
       "     1.1*x with lines dt 2 lc rgb 'gray40' title '+-10%' noenhanced, \\\n"
       "     0.9*x with lines dt 2 lc rgb 'gray40' notitle";
  int i = 0;
  const char* colors[] = {"#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e"};
  for (const auto& c : classes) {
    s += fmt::format(
        ", \\\n     '{}' using (strcol(3) eq '{}' ? $2 : 1/0):1 with points pt {} ps 1.2 lc rgb '{}' title '{}' "
        "noenhanced",
        data.string(), c, 5 + 2 * i, colors[i % 5], c);
    ++i;
  }
  s += "\n";
  return s;
}

void plot_reference(const ReferenceReport& r, const fs::path& out) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("dpsim-plot-{}", ::getpid());
  fs::create_directories(dir);
  const fs::path data = dir / "points.csv", script = dir / "plot.gp";
  std::string rows;
  for (const auto& p : r.points) rows += fmt::format("{:.9g},{:.9g},{}\n", p.predicted, p.published, p.cls);
  write_file_atomic(data, rows);
  write_file_atomic(script, gnuplot_script(r, data, fs::absolute(out)));
  const std::string cmd = fmt::format("gnuplot '{}' 2>'{}'", script.string(), (dir / "err.txt").string());
  const int rc = std::system(cmd.c_str());
  std::string err;
  if (rc != 0) {
    std::ifstream in(dir / "err.txt");
    std::stringstream ss;
    ss << in.rdbuf();
    err = ss.str();
  }
  fs::remove_all(dir);
  if (rc != 0) throw RuntimeError(fmt::format("gnuplot failed (exit {}) writing {}: {}", rc, out.string(), err));
}

}  // namespace dpsim::validation
