#include "plot_cost.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "dpsim/result.hpp"

namespace dpsim {

namespace fs = std::filesystem;

namespace {

// Axes the "GPU xN at P/GPU-h" part of a label already says.
const std::set<std::string> kShownAxes = {"cluster.topology", "cluster.nodes", "cluster.gpus_per_node", "cluster.gpu",
                                          "cluster.price_per_gpu_hour"};

std::string cell(const PlotRow& r, const std::string& column) {
  const auto it = r.find(column);
  return it == r.end() ? "" : it->second;
}

bool fits(const PlotRow& r) { return cell(r, "fits") == "true"; }

std::string no_quotes(std::string s) {
  std::replace(s.begin(), s.end(), '"', '\'');
  return s;
}

// "NVIDIA H200 x8 at 6.35/GPU-h", then the values of the other axes that differ between points.
std::string point_label(const PlotRow& r, const std::vector<std::string>& varying) {
  std::string out = fmt::format("{} x{}", cell(r, "gpu"), cell(r, "world_size"));
  if (!cell(r, "price_per_gpu_hour").empty()) out += fmt::format(" at {}/GPU-h", cell(r, "price_per_gpu_hour"));
  for (const auto& a : varying) out += fmt::format(", {}={}", a, cell(r, a));
  return no_quotes(out);
}

std::vector<std::string> varying_axes(const std::vector<PlotRow>& rows, const std::vector<std::string>& axes) {
  std::vector<std::string> out;
  for (const auto& a : axes) {
    if (kShownAxes.count(a)) continue;
    std::set<std::string> values;
    for (const auto& r : rows) values.insert(cell(r, a));
    if (values.size() > 1) out.push_back(a);
  }
  return out;
}

// The text above a bar: the cost, and the time to train when the sweep gives a total.
std::string bar_text(const PlotRow& r) {
  std::string out = fmt::format("{:.3g}", std::stod(cell(r, "cost_per_million_tokens")));
  const std::string t = cell(r, "time_to_train_s");
  if (!t.empty()) out += fmt::format(" ({:.1f} days)", std::stod(t) / (24 * 3600.0));
  return out;
}

}  // namespace

bool has_cost_columns(const std::vector<PlotRow>& rows) {
  return std::any_of(rows.begin(), rows.end(),
                     [](const PlotRow& r) { return !cell(r, "cost_per_million_tokens").empty(); });
}

std::vector<fs::path> cost_plot(const std::vector<PlotRow>& rows, const std::vector<std::string>& axes,
                                const fs::path& out, const PlotRender& render) {
  const auto varying = varying_axes(rows, axes);
  std::string data = "# x cost_per_million_tokens fits bar_text\n", xtics;
  double top = 0;
  int x = 0, fitting = 0;
  for (const auto& r : rows) {
    const std::string cost = cell(r, "cost_per_million_tokens");
    const bool bar = fits(r) && !cost.empty();
    if (bar) {
      top = std::max(top, std::stod(cost));
      ++fitting;
    }
    data += fmt::format("{} {} {} \"{}\"\n", x, bar ? cost : "NaN", fits(r) ? 1 : 0, bar ? bar_text(r) : "-");
    xtics += fmt::format("{}\"{}\" {}", x ? ", " : "", point_label(r, varying), x);
    ++x;
  }
  write_file_atomic(out / "cost.dat", data);
  const double ymax = top > 0 ? top * 1.4 : 1.0;
  const std::string body = fmt::format(
      "cd \"{}\"\nset title \"Predicted cost per million training tokens{}\" noenhanced\n"
      "set ylabel \"cost per 1M tokens (currency of cluster.price_per_gpu_hour)\" noenhanced\n"
      "set xlabel \"configuration (GPU x count at price per GPU-hour)\"\n"
      "set style fill solid 0.8 border -1\nset boxwidth 0.6\nset grid y\nset key top left noenhanced\n"
      "set yrange [0:{}]\nset xrange [-0.6:{}]\nset xtics ({}) rotate by 20 right noenhanced\nset bmargin 9\nset "
      "lmargin 24\nset rmargin 4\n"
      "plot 'cost.dat' using 1:($3>0?$2:1/0) with boxes lc rgb '#3a6fb0' "
      "title 'fits in GPU memory: price x GPUs x predicted step time / tokens per step', "
      "'' using 1:($3>0?$2:1/0):4 with labels offset 0,0.8 notitle, "
      "'' using 1:($3>0?1/0:0) with points pt 2 ps 3 lw 3 lc rgb '#c0392b' "
      "title 'does not fit in GPU memory: no cost shown (it cannot run)', "
      "'' using 1:($3>0?1/0:{}):(\"does not fit in GPU memory\") with labels rotate by 90 left tc rgb '#c0392b' "
      "notitle\n",
      out.string(), fitting ? "" : " (no configuration fits in GPU memory)", ymax, x - 0.4, xtics, ymax * 0.04);
  return render(out, "cost", body);
}

}  // namespace dpsim
