#include "dpsim/sweep/plot.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>

#include "dpsim/error.hpp"
#include "dpsim/result.hpp"
#include "dpsim/units.hpp"
#include "plot_cost.hpp"

namespace dpsim {

namespace fs = std::filesystem;

namespace {

using Row = std::map<std::string, std::string>;

// The legend entry of the marker over points whose configuration does not fit in GPU memory.
constexpr const char* kMisfitTitle = "does not fit in GPU memory";

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      out.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

struct Table {
  std::vector<std::string> axes;  // columns between "point" and "status"
  std::vector<Row> rows;          // successful points only
};

Table read_results(const fs::path& csv) {
  std::ifstream in(csv);
  if (!in) throw InputError(csv.string(), 0, "", "cannot be read (run dpsim sweep first)");
  std::string line;
  std::getline(in, line);
  const auto header = split_csv(line);
  const auto status = std::find(header.begin(), header.end(), "status");
  if (header.empty() || header[0] != "point" || status == header.end()) {
    throw InputError(csv.string(), 1, "", "not a dpsim sweep results.csv (no point/status columns)");
  }
  Table t;
  t.axes.assign(header.begin() + 1, status);
  for (int n = 2; std::getline(in, line); ++n) {
    const auto cells = split_csv(line);
    if (cells.size() != header.size()) throw InputError(csv.string(), n, "", "row has the wrong number of columns");
    Row r;
    for (size_t i = 0; i < cells.size(); ++i) r[header[i]] = cells[i];
    if (r["status"] == "ok") t.rows.push_back(std::move(r));
  }
  if (t.rows.empty()) throw InputError(csv.string(), 0, "", "no successful points to plot");
  return t;
}

// Units of the sweep keys whose values are plain numbers (docs/scenario-format.md); a value with its
// own unit ("400Gbps", "25MiB") is shown as the sweep file writes it.
const std::map<std::string, std::string> kPlainUnits = {
    {"cluster.nodes", "nodes"},
    {"cluster.gpus_per_node", "GPUs per node"},
    {"training.micro_batch", "samples per GPU"},
    {"training.sequence_length", "tokens per sample"},
    {"training.gradient_accumulation", "micro-steps"},
};

bool plain_number(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789.eE+-") == std::string::npos;
}

// "8 nodes" for cluster.nodes = 8; "400Gbps" stays "400Gbps".
std::string with_unit(const std::string& key, const std::string& value) {
  const auto u = kPlainUnits.find(key);
  return u != kPlainUnits.end() && plain_number(value) ? value + " " + u->second : value;
}

// "cluster.topology = h100-ib-cluster, cluster.nic_bandwidth = 400Gbps"; empty without keys.
std::string legend(const Row& r, const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += fmt::format("{}{} = {}", out.empty() ? "" : ", ", k, with_unit(k, r.at(k)));
  return out;
}

// The sweep's keys in the order of a breakdown bar's label, each with its unit: "cluster.nodes (nodes)".
std::string keys_with_units(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) {
    const auto u = kPlainUnits.find(k);
    out += (out.empty() ? "" : " / ") + k + (u == kPlainUnits.end() ? "" : " (" + u->second + ")");
  }
  return out;
}

std::string values(const Row& r, const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : " / ") + r.at(k);
  return out;
}

// Rows grouped by the axes other than `except`, the groups in the order the sweep first runs them (its axis values
// as written: 8, 16, 32, not "16" < "8"), each group sorted by the numeric column `x`.
std::vector<std::pair<std::string, std::vector<Row>>> groups(const Table& t, const std::vector<std::string>& except,
                                                             const std::string& x,
                                                             double (*to_number)(const std::string&)) {
  std::vector<std::string> keys;
  for (const auto& a : t.axes) {
    if (std::find(except.begin(), except.end(), a) == except.end()) keys.push_back(a);
  }
  std::vector<std::pair<std::string, std::vector<Row>>> out;
  for (const auto& r : t.rows) {
    const std::string name = legend(r, keys);
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& g) { return g.first == name; });
    if (it == out.end()) it = out.insert(out.end(), {name, {}});
    it->second.push_back(r);
  }
  for (auto& [name, rows] : out) {
    std::sort(rows.begin(), rows.end(),
              [&](const Row& a, const Row& b) { return to_number(a.at(x)) < to_number(b.at(x)); });
  }
  return out;
}

double number(const std::string& s) { return std::stod(s); }
double bytes(const std::string& s) { return parse_bytes(s); }
double ms(const std::string& seconds) { return std::stod(seconds) * 1e3; }

// 1 where the point's model state and activations fit in GPU memory, 0 where they do not.
int fits(const Row& r) { return r.at("fits") == "false" ? 0 : 1; }

bool any_misfit(const Table& t) {
  return std::any_of(t.rows.begin(), t.rows.end(), [](const Row& r) { return fits(r) == 0; });
}

std::string quoted(std::string s) {
  std::replace(s.begin(), s.end(), '"', '\'');
  return "\"" + s + "\"";
}

// A red cross over every point whose `fit_column` is 0, at (x_expr, y_expr); one legend entry.
std::string misfit_series(const std::string& data, const std::string& x_expr, const std::string& y_expr,
                          int fit_column) {
  return fmt::format(", {} using {}:(${} == 0 ? {} : 1/0) with points pt 2 ps 2.5 lw 2 lc rgb 'red' title {}",
                     quoted(data), x_expr, fit_column, y_expr, quoted(kMisfitTitle));
}

// Settings every plot shares: plain text (keys hold underscores), a grid.
constexpr const char* kCommon = "set termoption noenhanced\nset grid\n";

// Runs one gnuplot script once per format; returns the images.
std::vector<fs::path> render(const fs::path& out_dir, const std::string& name, const std::string& body) {
  std::vector<fs::path> files;
  for (const auto& [ext, terminal] :
       {std::pair{"png", "pngcairo size 1200,700 font ',10'"}, {"svg", "svg size 1200,700"}}) {
    const fs::path image = out_dir / fmt::format("{}.{}", name, ext);
    const fs::path script = out_dir / fmt::format("{}.{}.gp", name, ext);
    write_file_atomic(
        script, fmt::format("set terminal {}\nset output {}\n{}{}", terminal, quoted(image.string()), kCommon, body));
    const std::string cmd =
        fmt::format("gnuplot {} 2>{}", quoted(script.string()), quoted((out_dir / "gnuplot.log").string()));
    if (std::system(cmd.c_str()) != 0) {
      throw RuntimeError(fmt::format("gnuplot failed on {} (is gnuplot installed? see {})", script.string(),
                                     (out_dir / "gnuplot.log").string()));
    }
    files.push_back(image);
  }
  return files;
}

// Reference lines of the scaling-efficiency panel: (percent, gnuplot line style, legend entry).
struct EfficiencyLine {
  int percent;
  const char* style;
  const char* title;
};
constexpr EfficiencyLine kEfficiencyLines[] = {
    {100, "dt 3 lw 2 lc rgb 'black'", "100% (linear scaling)"},
    {90, "dt 2 lw 2 lc rgb 'gray40'", "90% scaling efficiency"},
};

std::vector<fs::path> scaling(const Table& t, const fs::path& out) {
  const auto g = groups(t, {"cluster.nodes", "cluster.gpus_per_node"}, "world_size", number);
  std::string data = "# GPUs, samples/s, scaling efficiency (%), fits in GPU memory (1/0)\n";
  std::string thr = "plot ", eff = "plot ", lines;
  for (const auto& [percent, style, title] : kEfficiencyLines) {
    // An arrow spans the panel even when every point has the same x; the NaN series is its legend entry.
    lines +=
        fmt::format("set arrow from graph 0, first {} to graph 1, first {} nohead {} back\n", percent, percent, style);
    eff += fmt::format("{}NaN with lines {} title '{}'", eff == "plot " ? "" : ", ", style, title);
  }
  int block = 0;
  for (const auto& [name, rows] : g) {
    data += fmt::format("# {}\n", name);
    for (const auto& r : rows)
      data += fmt::format("{} {} {:.6g} {}\n", r.at("world_size"), r.at("samples_per_s"),
                          std::stod(r.at("scaling_efficiency")) * 100, fits(r));
    data += "\n\n";
    const std::string title = quoted(name.empty() ? "predicted" : name);
    thr += fmt::format("{}'scaling.dat' index {} using 1:2 with linespoints lw 2 pt 7 lc {} title {}",
                       block ? ", " : "", block, block + 1, title);
    eff += fmt::format(", 'scaling.dat' index {} using 1:3 with linespoints lw 2 pt 7 lc {} title {}", block, block + 1,
                       title);
    ++block;
  }
  if (any_misfit(t)) {
    thr += misfit_series("scaling.dat", "1", "$2", 4);
    eff += misfit_series("scaling.dat", "1", "$3", 4);
  }
  write_file_atomic(out / "scaling.dat", data);
  const std::string body = fmt::format(
      "cd {}\nset multiplot layout 1,2 title 'Scaling (world_size = cluster.nodes x cluster.gpus_per_node)'\n"
      "set logscale x 2\nset key top left box opaque\nset xlabel 'world_size (GPUs)'\n"
      "set title 'Throughput'\nset ylabel 'samples_per_s (samples/s)'\nset logscale y\n{}\nunset logscale y\n"
      "set title 'Scaling efficiency (one GPU without communication / step time)'\n"
      "set ylabel 'scaling_efficiency (%)'\nset yrange [0:115]\nset key bottom left\n{}{}\nunset multiplot\n",
      quoted(out.string()), thr, lines, eff);
  return render(out, "scaling", body);
}

// Memory per GPU against the GPU count, one line per value of the other axes (e.g. parallelism.sharding), and the
// GPU's memory as a line: what fits where.
std::vector<fs::path> memory(const Table& t, const fs::path& out) {
  const auto g = groups(t, {"cluster.nodes", "cluster.gpus_per_node"}, "world_size", number);
  std::string data = "# GPUs, memory needed per GPU (GB), GPU memory (GB), fits in GPU memory (1/0)\n";
  std::string plot = "plot ";
  int block = 0;
  double gpu_gb = 0, lo_gb = 0, hi_gb = 0;  // the y range holds every point and the GPU's memory line
  for (const auto& [name, rows] : g) {
    data += fmt::format("# {}\n", name);
    for (const auto& r : rows) {
      gpu_gb = std::max(gpu_gb, std::stod(r.at("gpu_memory_bytes")) / 1e9);
      const double need_gb = std::stod(r.at("memory_bytes_per_gpu")) / 1e9;
      lo_gb = lo_gb > 0 ? std::min(lo_gb, need_gb) : need_gb;
      hi_gb = std::max(hi_gb, need_gb);
      data += fmt::format("{} {:.6g} {:.6g} {}\n", r.at("world_size"), std::stod(r.at("memory_bytes_per_gpu")) / 1e9,
                          std::stod(r.at("gpu_memory_bytes")) / 1e9, fits(r));
    }
    data += "\n\n";
    plot += fmt::format("{}'memory.dat' index {} using 1:2 with linespoints lw 2 pt 7 lc {} title {}",
                        block ? ", " : "", block, block + 1, quoted(name.empty() ? "predicted" : name));
    ++block;
  }
  plot +=
      fmt::format(", NaN with lines dt 2 lw 2 lc rgb 'black' title 'GPU memory ({:.1f} GB, gpu_memory_bytes)'", gpu_gb);
  write_file_atomic(out / "memory.dat", data);
  const std::string body = fmt::format(
      "cd {}\nset title 'Memory per GPU: model state + activations + buffers + CUDA and NCCL "
      "(memory.needed_bytes_per_gpu)'\n"
      "set logscale x 2\nset logscale y\nset yrange [{:.6g}:{:.6g}]\nset ytics add (2, 5, 20, 50, 200, 500, 2000, "
      "5000)\n"
      "set key top right box opaque\n"
      "set xlabel 'world_size (GPUs)'\n"
      "set ylabel 'memory needed per GPU (GB)'\nset arrow from graph 0, first {:.6g} to graph 1, first {:.6g} nohead "
      "dt 2 lw 2 lc rgb 'black' back\n{}\n",
      quoted(out.string()), std::min(lo_gb, gpu_gb) / 1.5, std::max(hi_gb, gpu_gb) * 1.5, gpu_gb, gpu_gb, plot);
  return render(out, "memory", body);
}

std::vector<fs::path> breakdown(const Table& t, const fs::path& out) {
  // Tensor-parallel communication is a bar of its own where the sweep has any (results.csv files from before it
  // have no tensor_comm_s column: none).
  // Context parallelism's exposed exchange likewise (context_comm_s, empty without it).
  const auto has = [&](const char* column) {
    for (const auto& r : t.rows)
      if (r.count(column) && !r.at(column).empty() && ms(r.at(column)) > 0) return true;
    return false;
  };
  const bool tensor = has("tensor_comm_s"), context = has("context_comm_s");
  const auto col_ms = [](const std::map<std::string, std::string>& r, const char* column, bool present) {
    return present && !r.at(column).empty() ? ms(r.at(column)) : 0.0;
  };
  std::string data =
      "# point forward_ms backward_ms exposed_comm_ms optimizer_ms step_time_ms fits tensor_comm_ms "
      "context_comm_ms\n";
  for (const auto& r : t.rows) {
    data += fmt::format("{} {:.6g} {:.6g} {:.6g} {:.6g} {:.6g} {} {:.6g} {:.6g}\n", quoted(values(r, t.axes)),
                        ms(r.at("forward_s")), ms(r.at("backward_s")), ms(r.at("exposed_comm_s")),
                        ms(r.at("optimizer_s")), ms(r.at("step_time_s")), fits(r), col_ms(r, "tensor_comm_s", tensor),
                        col_ms(r, "context_comm_s", context));
  }
  write_file_atomic(out / "breakdown.dat", data);
  std::string plot =
      "plot 'breakdown.dat' using 2:xtic(1) title 'forward (forward_s)', '' using 3 title 'backward (backward_s)', ";
  if (tensor) plot += "'' using 8 title 'tensor-parallel communication, blocking (tensor_comm_s)', ";
  if (context) plot += "'' using 9 title 'context-parallel exchange, exposed (context_comm_s)', ";
  plot +=
      "'' using 4 title 'exposed communication, not hidden by the backward (exposed_comm_s)', "
      "'' using 5 title 'optimizer (optimizer_s)'";
  if (any_misfit(t)) plot += misfit_series("breakdown.dat", "0", "$6", 7);
  const std::string body = fmt::format(
      "cd {}\nset title 'Step breakdown per sweep point'\nset style data histograms\nset style histogram rowstacked\n"
      "set style fill solid 0.8 border -1\nset boxwidth 0.7\nset ylabel 'time per step (ms)'\nset yrange [0:*]\n"
      "set key outside right box\nset xtics rotate by -35\nset xlabel {}\n{}\n",
      quoted(out.string()), quoted("sweep point: " + keys_with_units(t.axes)), plot);
  return render(out, "breakdown", body);
}

std::vector<fs::path> buckets(const Table& t, const fs::path& out) {
  const auto g = groups(t, {"ddp.bucket_cap"}, "ddp.bucket_cap", bytes);
  std::string data = "# ddp.bucket_cap (MB), step_time (ms), exposed_comm (ms), fits in GPU memory (1/0)\n";
  std::string plot = "plot ";
  int block = 0;
  for (const auto& [name, rows] : g) {
    data += fmt::format("# {}\n", name);
    for (const auto& r : rows) {
      data += fmt::format("{:.6g} {:.6g} {:.6g} {}\n", parse_bytes(r.at("ddp.bucket_cap")) / 1e6,
                          ms(r.at("step_time_s")), ms(r.at("exposed_comm_s")), fits(r));
    }
    data += "\n\n";
    const std::string prefix = name.empty() ? "" : name + ": ";
    plot += fmt::format(
        "{}'buckets.dat' index {} using 1:2 with linespoints lw 2 pt 7 lc {} title {}, '' index {} using 1:3 with "
        "linespoints lw 2 pt 6 dashtype 2 lc {} title {}",
        block ? ", " : "", block, block + 1, quoted(prefix + "step time (step_time_s)"), block, block + 1,
        quoted(prefix + "exposed communication (exposed_comm_s)"));
    ++block;
  }
  if (any_misfit(t)) plot += misfit_series("buckets.dat", "1", "$2", 4);
  write_file_atomic(out / "buckets.dat", data);
  const std::string body = fmt::format(
      "cd {}\nset title 'Bucket-size sensitivity'\nset logscale x 10\nset xlabel 'ddp.bucket_cap (MB, 10^6 bytes)'\n"
      "set ylabel 'time per step (ms)'\nset yrange [0:*]\nset key outside right box\n{}\n",
      quoted(out.string()), plot);
  return render(out, "buckets", body);
}

}  // namespace

std::vector<fs::path> plot_sweep(const fs::path& results_csv, const fs::path& out_dir,
                                 const std::vector<std::string>& kinds) {
  const Table t = read_results(results_csv);
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw RuntimeError(fmt::format("cannot create {}: {}", out_dir.string(), ec.message()));
  const bool has_buckets = std::find(t.axes.begin(), t.axes.end(), "ddp.bucket_cap") != t.axes.end();
  const bool has_cost = has_cost_columns(t.rows);
  const bool has_sharding = std::find(t.axes.begin(), t.axes.end(), "parallelism.sharding") != t.axes.end() ||
                            std::find(t.axes.begin(), t.axes.end(), "parallelism.shard_group") != t.axes.end();
  const bool has_memory = !t.rows.empty() && t.rows.front().count("memory_bytes_per_gpu") &&
                          !t.rows.front().at("memory_bytes_per_gpu").empty();
  // The scaling plot's x axis is the world size: a sweep at one world size (a tensor-degree sweep on one cluster) gets
  // no scaling plot unless asked for.
  std::set<std::string> worlds;
  for (const auto& r : t.rows)
    if (r.count("world_size") && !r.at("world_size").empty()) worlds.insert(r.at("world_size"));
  std::vector<std::string> want = kinds;
  if (want.empty()) {
    if (worlds.size() != 1) want.push_back("scaling");
    want.push_back("breakdown");
    if (has_buckets) want.push_back("buckets");
  }
  if (kinds.empty() && has_sharding && has_memory) want.push_back("memory");
  if (kinds.empty() && has_cost) want.push_back("cost");
  std::vector<fs::path> files;
  for (const auto& k : want) {
    std::vector<fs::path> made;
    if (k == "scaling") {
      made = scaling(t, out_dir);
    } else if (k == "breakdown") {
      made = breakdown(t, out_dir);
    } else if (k == "buckets") {
      if (!has_buckets) throw InputError("plot buckets needs a sweep with a ddp.bucket_cap axis");
      made = buckets(t, out_dir);
    } else if (k == "memory") {
      if (!has_memory)
        throw InputError(
            "plot memory needs results.csv with a memory_bytes_per_gpu column (sweeps run by an older dpsim lack it)");
      made = memory(t, out_dir);
    } else if (k == "cost") {
      if (!has_cost) throw InputError("plot cost needs a sweep with cost columns (set cluster.price_per_gpu_hour)");
      made = cost_plot(t.rows, t.axes, out_dir, render);
    } else {
      throw InputError(fmt::format("unknown plot kind \"{}\" (scaling, breakdown, buckets, memory, cost)", k));
    }
    files.insert(files.end(), made.begin(), made.end());
  }
  return files;
}

}  // namespace dpsim
