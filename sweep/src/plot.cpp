#include "dpsim/sweep/plot.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "dpsim/error.hpp"
#include "dpsim/result.hpp"
#include "dpsim/units.hpp"
#include "plot_cost.hpp"

namespace dpsim {

namespace fs = std::filesystem;

namespace {

using Row = std::map<std::string, std::string>;

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

std::string label(const Row& r, const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : " ") + r.at(k);
  return out.empty() ? "all" : out;
}

// Rows grouped by the axes other than `except`, each group sorted by the numeric column `x`.
std::map<std::string, std::vector<Row>> groups(const Table& t, const std::vector<std::string>& except,
                                               const std::string& x, double (*to_number)(const std::string&)) {
  std::vector<std::string> keys;
  for (const auto& a : t.axes) {
    if (std::find(except.begin(), except.end(), a) == except.end()) keys.push_back(a);
  }
  std::map<std::string, std::vector<Row>> out;
  for (const auto& r : t.rows) out[label(r, keys)].push_back(r);
  for (auto& [name, rows] : out) {
    std::sort(rows.begin(), rows.end(),
              [&](const Row& a, const Row& b) { return to_number(a.at(x)) < to_number(b.at(x)); });
  }
  return out;
}

double number(const std::string& s) { return std::stod(s); }
double bytes(const std::string& s) { return parse_bytes(s); }

std::string quoted(std::string s) {
  std::replace(s.begin(), s.end(), '"', '\'');
  return "\"" + s + "\"";
}

// Runs one gnuplot script once per format; returns the images.
std::vector<fs::path> render(const fs::path& out_dir, const std::string& name, const std::string& body) {
  std::vector<fs::path> files;
  for (const auto& [ext, terminal] :
       {std::pair{"png", "pngcairo size 1000,650 font ',10'"}, {"svg", "svg size 1000,650"}}) {
    const fs::path image = out_dir / fmt::format("{}.{}", name, ext);
    const fs::path script = out_dir / fmt::format("{}.{}.gp", name, ext);
    write_file_atomic(script,
                      fmt::format("set terminal {}\nset output {}\n{}", terminal, quoted(image.string()), body));
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

std::vector<fs::path> scaling(const Table& t, const fs::path& out) {
  const auto g = groups(t, {"cluster.nodes", "cluster.gpus_per_node"}, "world_size", number);
  std::string data, thr = "plot ", eff = "plot ";
  int block = 0;
  for (const auto& [name, rows] : g) {
    data += fmt::format("# {}\n", name);
    for (const auto& r : rows)
      data += fmt::format("{} {} {}\n", r.at("world_size"), r.at("samples_per_s"), r.at("scaling_efficiency"));
    data += "\n\n";
    const std::string sep = block ? ", " : "";
    thr += fmt::format("{}'scaling.dat' index {} using 1:2 with linespoints title {}", sep, block, quoted(name));
    eff += fmt::format("{}'scaling.dat' index {} using 1:($3*100) with linespoints title {}", sep, block, quoted(name));
    ++block;
  }
  write_file_atomic(out / "scaling.dat", data);
  const std::string body = fmt::format(
      "cd {}\nset multiplot layout 1,2 title 'Scaling'\nset logscale x 2\nset grid\nset key top left\n"
      "set xlabel 'GPUs'\nset ylabel 'throughput (samples/s)'\nset logscale y\n{}\nunset logscale y\n"
      "set ylabel 'scaling efficiency (%)'\nset yrange [0:105]\n{}\nunset multiplot\n",
      quoted(out.string()), thr, eff);
  return render(out, "scaling", body);
}

std::vector<fs::path> breakdown(const Table& t, const fs::path& out) {
  std::string data = "point forward backward exposed_comm optimizer\n";
  for (const auto& r : t.rows) {
    data += fmt::format("{} {} {} {} {}\n", quoted(label(r, t.axes)), r.at("forward_s"), r.at("backward_s"),
                        r.at("exposed_comm_s"), r.at("optimizer_s"));
  }
  write_file_atomic(out / "breakdown.dat", data);
  const std::string body = fmt::format(
      "cd {}\nset title 'Step breakdown per point'\nset style data histograms\nset style histogram rowstacked\n"
      "set style fill solid 0.8 border -1\nset boxwidth 0.7\nset ylabel 'seconds'\nset grid y\nset key outside right\n"
      "set xtics rotate by -35\nplot 'breakdown.dat' using 2:xtic(1) title 'forward', '' using 3 title 'backward', "
      "'' using 4 title 'exposed communication', '' using 5 title 'optimizer'\n",
      quoted(out.string()));
  return render(out, "breakdown", body);
}

std::vector<fs::path> buckets(const Table& t, const fs::path& out) {
  const auto g = groups(t, {"ddp.bucket_cap"}, "ddp.bucket_cap", bytes);
  std::string data, plot = "plot ";
  int block = 0;
  for (const auto& [name, rows] : g) {
    data += fmt::format("# {}\n", name);
    for (const auto& r : rows) {
      data += fmt::format("{} {} {}\n", parse_bytes(r.at("ddp.bucket_cap")) / 1048576.0, r.at("step_time_s"),
                          r.at("exposed_comm_s"));
    }
    data += "\n\n";
    plot += fmt::format(
        "{}'buckets.dat' index {} using 1:2 with linespoints title {}, '' index {} using 1:3 with "
        "linespoints dashtype 2 title {}",
        block ? ", " : "", block, quoted(name + " step"), block, quoted(name + " exposed comm"));
    ++block;
  }
  write_file_atomic(out / "buckets.dat", data);
  const std::string body = fmt::format(
      "cd {}\nset title 'Bucket-size sensitivity'\nset logscale x 2\nset grid\nset xlabel 'DDP bucket cap (MiB)'\n"
      "set ylabel 'seconds'\nset key outside right\n{}\n",
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
  std::vector<std::string> want = kinds;
  if (want.empty())
    want = has_buckets ? std::vector<std::string>{"scaling", "breakdown", "buckets"}
                       : std::vector<std::string>{"scaling", "breakdown"};
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
    } else if (k == "cost") {
      if (!has_cost) throw InputError("plot cost needs a sweep with cost columns (set cluster.price_per_gpu_hour)");
      made = cost_plot(t.rows, t.axes, out_dir, render);
    } else {
      throw InputError(fmt::format("unknown plot kind \"{}\" (scaling, breakdown, buckets, cost)", k));
    }
    files.insert(files.end(), made.begin(), made.end());
  }
  return files;
}

}  // namespace dpsim
