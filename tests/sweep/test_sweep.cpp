#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include "../source_dir.hpp"

#include "dpsim/error.hpp"
#include "dpsim/estimate.hpp"
#include "dpsim/load.hpp"
#include "dpsim/plan.hpp"
#include "dpsim/sweep/plot.hpp"
#include "dpsim/sweep/runner.hpp"

using namespace dpsim;
namespace fs = std::filesystem;

namespace {

fs::path src(const std::string& rel) { return fs::path(DPSIM_SOURCE_DIR) / rel; }

std::string read(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A small estimate sweep written next to the shipped scenarios (relative base path).
fs::path small_sweep(const fs::path& dir) {
  fs::create_directories(dir);
  const fs::path f = dir / "small.yaml";
  std::ofstream(f) << "name: small\nbase: " << src("scenarios/gpt2-1.5b-16xh100-ib.yaml").string()
                   << "\ncommand: estimate\naxes:\n  cluster.nodes: [1, 2, 4]\n  ddp.bucket_cap: [4MiB, 25MiB]\n";
  return f;
}

SweepSummary run(const SweepSpec& spec, const fs::path& out, int jobs, int64_t limit = -1, bool resume = false) {
  SweepOptions o;
  o.jobs = jobs;
  o.out_dir = out;
  o.limit = limit;
  o.resume = resume;
  o.progress = false;
  return run_sweep(spec, o);
}

}  // namespace

TEST_CASE("grid points: the first axis varies slowest; zip pairs values") {
  const fs::path dir = fs::temp_directory_path() / "dpsim-sweep-grid";
  SweepSpec spec = load_sweep(small_sweep(dir));
  REQUIRE(spec.point_count() == 6);
  auto p = sweep_point(spec, 1);
  CHECK(p[0].value == "1");
  CHECK(p[1].value == "25MiB");
  p = sweep_point(spec, 4);
  CHECK(p[0].value == "4");
  CHECK(p[1].value == "4MiB");
  spec.mode = SweepMode::zip;
  spec.axes[1].values.push_back("100MiB");
  CHECK(spec.point_count() == 3);
  CHECK(sweep_point(spec, 2)[1].value == "100MiB");
  fs::remove_all(dir);
}

TEST_CASE("bad sweeps are refused up front with their exact message") {
  for (const auto& name : {"billion-points.yaml", "zip-unequal.yaml"}) {
    const fs::path f = src("tests/bad-inputs/sweeps") / name;
    std::ifstream in(f);
    std::string first;
    std::getline(in, first);
    std::string want = first.substr(std::string("# expect: ").size());
    want.replace(want.find("{file}"), 6, f.string());
    INFO(f.string());
    CHECK_THROWS_WITH(load_sweep(f), want);
  }
}

TEST_CASE("a sweep writes one row per point, byte-identical with -j1 and -j2") {
  const fs::path dir = fs::temp_directory_path() / "dpsim-sweep-det";
  const SweepSpec spec = load_sweep(small_sweep(dir));
  const auto a = run(spec, dir / "a", 1);
  const auto b = run(spec, dir / "b", 2);
  CHECK(a.ran == 6);
  CHECK(a.failed == 0);
  CHECK(b.ran == 6);
  const std::string csv = read(dir / "a" / "results.csv");
  CHECK(csv == read(dir / "b" / "results.csv"));
  CHECK(read(dir / "a" / "results.jsonl") == read(dir / "b" / "results.jsonl"));
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 7);  // header + 6 points
  CHECK(csv.rfind("point,cluster.nodes,ddp.bucket_cap,status,error,world_size,step_time_s", 0) == 0);
  fs::remove_all(dir);
}

TEST_CASE("a row counts the step's buckets and calls instead of listing their timing") {
  const fs::path dir = fs::temp_directory_path() / "dpsim-sweep-counts";
  const SweepSpec spec = load_sweep(small_sweep(dir));
  const nlohmann::json row = nlohmann::json::parse(evaluate_point(spec, 0).json_line);
  const Scenario s = load_scenario(spec.base, sweep_point(spec, 0));
  const StepResult r = estimate(s, make_step_plan(s)).result;
  REQUIRE(!r.comm.empty());
  CHECK(row.at("result").at("comm").empty());
  CHECK(row.at("result").at("buckets").empty());
  CHECK(row.at("result").at("comm_count") == r.comm.size());
  CHECK(row.at("result").at("buckets_count") == r.buckets.size());
  CHECK(row.at("result").at("step").at("time_s") == r.step_time_s);
  fs::remove_all(dir);
}

TEST_CASE("resume runs only the missing points and ends with the same files") {
  const fs::path dir = fs::temp_directory_path() / "dpsim-sweep-resume";
  const SweepSpec spec = load_sweep(small_sweep(dir));
  run(spec, dir / "full", 2);
  const auto first = run(spec, dir / "part", 2, 2);
  CHECK(first.ran == 2);
  const auto rest = run(spec, dir / "part", 2, -1, true);
  CHECK(rest.skipped == 2);
  CHECK(rest.ran == 4);
  CHECK(read(dir / "part" / "results.csv") == read(dir / "full" / "results.csv"));
  fs::remove_all(dir);
}

TEST_CASE("shards partition the points") {
  const fs::path dir = fs::temp_directory_path() / "dpsim-sweep-shard";
  const SweepSpec spec = load_sweep(small_sweep(dir));
  SweepOptions o;
  o.out_dir = dir / "s0";
  o.progress = false;
  o.shard_count = 2;
  CHECK(run_sweep(spec, o).ran == 3);
  o.out_dir = dir / "s1";
  o.shard_index = 1;
  CHECK(run_sweep(spec, o).ran == 3);
  o.shard_index = 2;
  CHECK_THROWS_AS(run_sweep(spec, o), InputError);
  fs::remove_all(dir);
}

TEST_CASE("a failing point records its error and the sweep goes on") {
  const fs::path dir = fs::temp_directory_path() / "dpsim-sweep-fail";
  fs::create_directories(dir);
  const fs::path f = dir / "fail.yaml";
  std::ofstream(f) << "base: " << src("scenarios/gpt2-1.5b-16xh100-ib.yaml").string()
                   << "\ncommand: estimate\naxes:\n  training.micro_batch: [1, -3, 2]\n";
  const auto s = run(load_sweep(f), dir / "out", 2);
  CHECK(s.ran == 3);
  CHECK(s.failed == 1);
  const std::string csv = read(dir / "out" / "results.csv");
  CHECK(csv.find("error,") != std::string::npos);
  CHECK(csv.find("-3 is out of range") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("every plot kind renders as PNG and SVG") {
  const fs::path dir = fs::temp_directory_path() / "dpsim-sweep-plot";
  const SweepSpec spec = load_sweep(small_sweep(dir));
  run(spec, dir / "r", 2);
  const auto files = plot_sweep(dir / "r" / "results.csv", dir / "plots", {"scaling", "breakdown", "buckets"});
  REQUIRE(files.size() == 6);
  for (const auto& f : files) {
    INFO(f.string());
    const std::string bytes = read(f);
    REQUIRE(bytes.size() > 1000);
    if (f.extension() == ".png") CHECK(bytes.substr(1, 3) == "PNG");
    if (f.extension() == ".svg") CHECK(bytes.find("<svg") != std::string::npos);
  }
  fs::remove_all(dir);
}

namespace {

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out(1);
  for (char c : line) {
    if (c == ',')
      out.emplace_back();
    else
      out.back().push_back(c);
  }
  return out;
}

}  // namespace

TEST_CASE("the which-GPU sweep runs, reports cost per point and marks the configurations that do not fit") {
  const fs::path dir = fs::temp_directory_path() / "dpsim-sweep-which-gpu";
  fs::remove_all(dir);
  const SweepSpec spec = load_sweep(src("scenarios/sweeps/which-gpu-llama3.1-8b.yaml"));
  const auto s = run(spec, dir / "r", 2);
  CHECK(s.failed == 0);
  std::istringstream csv(read(dir / "r" / "results.csv"));
  std::string line;
  std::getline(csv, line);
  const auto header = split(line);
  const auto col = [&](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    REQUIRE(it != header.end());
    return static_cast<size_t>(it - header.begin());
  };
  std::map<std::string, std::vector<std::string>> by_topology;
  while (std::getline(csv, line)) {
    const auto cells = split(line);
    REQUIRE(cells.size() == header.size());
    by_topology[cells[col("cluster.topology")]] = cells;
  }
  REQUIRE(by_topology.size() == 5);
  for (const auto& [topology, cells] : by_topology) {
    INFO(topology);
    CHECK(cells[col("status")] == "ok");
    // 128.5 GB of AdamW state per GPU under DDP: only the 141 GB H200 holds it.
    CHECK(cells[col("fits")] == (topology == "h200-8x-nvswitch" ? "true" : "false"));
    const double price = std::stod(cells[col("price_per_gpu_hour")]);
    const double step = std::stod(cells[col("step_time_s")]);
    const double gpus = std::stod(cells[col("world_size")]);
    CHECK(std::stod(cells[col("cost_per_step")]) == Approx(price * gpus * step / 3600));
    CHECK(!cells[col("cost_per_million_tokens")].empty());
    CHECK(!cells[col("time_to_train_s")].empty());
  }
  CHECK(by_topology["rtx4090-4x-pcie4"][col("world_size")] == "4");
  // The cost plot draws a bar only for the point that fits; the other four are NaN (marked, not drawn).
  const auto files = plot_sweep(dir / "r" / "results.csv", dir / "plots", {"cost"});
  REQUIRE(files.size() == 2);
  CHECK(read(files[0]).substr(1, 3) == "PNG");
  const std::string dat = read(dir / "plots" / "cost.dat");
  size_t nan = 0;
  for (size_t at = dat.find(" NaN 0 "); at != std::string::npos; at = dat.find(" NaN 0 ", at + 1)) ++nan;
  CHECK(nan == 4);
  CHECK(dat.find(" 1 \"") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("plot cost without cost columns is refused") {
  const fs::path dir = fs::temp_directory_path() / "dpsim-sweep-nocost";
  const SweepSpec spec = load_sweep(small_sweep(dir));
  run(spec, dir / "r", 2);
  CHECK_THROWS_WITH(plot_sweep(dir / "r" / "results.csv", dir / "plots", {"cost"}),
                    Catch::Contains("set cluster.price_per_gpu_hour"));
  fs::remove_all(dir);
}

TEST_CASE("plots name axes and legend entries with key and unit, draw 90% and mark points that do not fit") {
  const fs::path dir = fs::temp_directory_path() / "dpsim-sweep-plot-labels";
  fs::create_directories(dir);
  const fs::path f = dir / "fit.yaml";
  // Llama 3.1 8B with DDP: 128.5 GB of model state per GPU fits the H200's 141 GB, not the H100's 80 GB.
  std::ofstream(f) << "base: " << src("scenarios/llama3.1-8b-8xh100.yaml").string()
                   << "\ncommand: estimate\naxes:\n  cluster.topology: [h100-8x-nvswitch, h200-8x-nvswitch]\n"
                      "  cluster.gpus_per_node: [4, 8]\n";
  run(load_sweep(f), dir / "r", 2);
  plot_sweep(dir / "r" / "results.csv", dir / "plots", {"scaling", "breakdown"});
  const std::string scaling = read(dir / "plots" / "scaling.png.gp");
  CHECK(scaling.find("set xlabel 'world_size (GPUs)'") != std::string::npos);
  CHECK(scaling.find("set ylabel 'samples_per_s (samples/s)'") != std::string::npos);
  CHECK(scaling.find("set ylabel 'scaling_efficiency (%)'") != std::string::npos);
  CHECK(scaling.find("set arrow from graph 0, first 90 to graph 1, first 90 nohead dt 2") != std::string::npos);
  CHECK(scaling.find("NaN with lines dt 2 lw 2 lc rgb 'gray40' title '90% scaling efficiency'") != std::string::npos);
  CHECK(scaling.find("title '100% (linear scaling)'") != std::string::npos);
  CHECK(scaling.find("title \"cluster.topology = h100-8x-nvswitch\"") != std::string::npos);
  CHECK(scaling.find("title \"does not fit in GPU memory\"") != std::string::npos);
  // The marker series draws exactly the H100 points: fits is column 4 of scaling.dat, 0 for the H100 block only.
  const std::string data = read(dir / "plots" / "scaling.dat");
  const size_t h100 = data.find("# cluster.topology = h100-8x-nvswitch\n"),
               h200 = data.find("# cluster.topology = h200-8x-nvswitch\n");
  REQUIRE(h100 != std::string::npos);
  REQUIRE(h200 != std::string::npos);
  CHECK(data.substr(h100, h200 - h100).find(" 1\n") == std::string::npos);
  CHECK(data.substr(h200).find(" 0\n") == std::string::npos);
  CHECK(scaling.find("using 1:($4 == 0 ? $2 : 1/0) with points") != std::string::npos);
  const std::string breakdown = read(dir / "plots" / "breakdown.png.gp");
  CHECK(breakdown.find("set xlabel \"sweep point: cluster.topology / cluster.gpus_per_node (GPUs per node)\"") !=
        std::string::npos);
  CHECK(breakdown.find("set ylabel 'time per step (ms)'") != std::string::npos);
  CHECK(breakdown.find("title \"does not fit in GPU memory\"") != std::string::npos);
  CHECK(read(dir / "plots" / "breakdown.dat").find("\"h100-8x-nvswitch / 4\"") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("a sweep where every point fits has no does-not-fit entry; legends carry the value's unit") {
  const fs::path dir = fs::temp_directory_path() / "dpsim-sweep-plot-fit";
  run(load_sweep(small_sweep(dir)), dir / "r", 2);
  plot_sweep(dir / "r" / "results.csv", dir / "plots", {"scaling", "buckets"});
  const std::string scaling = read(dir / "plots" / "scaling.png.gp");
  CHECK(scaling.find("does not fit") == std::string::npos);
  CHECK(scaling.find("title \"ddp.bucket_cap = 25MiB\"") != std::string::npos);
  const std::string buckets = read(dir / "plots" / "buckets.png.gp");
  CHECK(buckets.find("set xlabel 'ddp.bucket_cap (MB, 10^6 bytes)'") != std::string::npos);
  CHECK(buckets.find("title \"cluster.nodes = 2 nodes: step time (step_time_s)\"") != std::string::npos);
  fs::remove_all(dir);
}
