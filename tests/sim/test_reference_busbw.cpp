// Predicted all-reduce bus bandwidth against the published measurements in validation/reference/
// (entries mapped to a shipped topology), for sizes >= 1 MiB, printing every error.
// Target (issue 3): within 10%. NVLS and the ring use the pipeline fills of data/nccl.yaml (fitted to the H200 and
// A100 nccl-tests sweeps); sweeps timed through torch.distributed also pay PyTorch's launch of each call.
#include <yaml-cpp/yaml.h>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "dpsim/load.hpp"
#include "dpsim/sim/simulate.hpp"
#include "dpsim/units.hpp"
#include "sim_fixtures.hpp"

using namespace dpsim;

namespace {

constexpr double kPeakSize = 8.0 * (1LL << 30);  // "peak reported" sweeps: a size on the plateau

struct Point {
  std::string id;
  std::string topology;
  int nodes = 1;
  int gpus_per_node = 0;  // 0: the topology's
  Algorithm algorithm = Algorithm::automatic;
  double bytes = 0;
  double busbw_GBps = 0;
  bool torch_timed = false;  // timed through torch.distributed (software.framework), not nccl-tests
};

Algorithm algorithm_of(const std::string& text) {
  if (text.rfind("ring", 0) == 0) return Algorithm::ring;
  if (text.rfind("tree", 0) == 0) return Algorithm::tree;
  if (text.rfind("nvls", 0) == 0) return Algorithm::nvls;
  return Algorithm::automatic;
}

std::vector<Point> load_points() {
  std::vector<Point> points;
  const auto dir = std::filesystem::path(DPSIM_SOURCE_DIR) / "validation" / "reference";
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".yaml" || e.path().filename().string().rfind("allreduce", 0) != 0) continue;
    for (const YAML::Node& entry : YAML::LoadFile(e.path().string())) {
      const auto kind = entry["kind"].as<std::string>("");
      if (kind.rfind("allreduce_busbw", 0) != 0) continue;
      const YAML::Node sc = entry["scenario"];
      if (!sc || sc["topology"].as<std::string>("unmapped").rfind("unmapped", 0) == 0) continue;
      Point base;
      base.id = entry["id"].as<std::string>();
      base.torch_timed = entry["software"]["framework"].as<std::string>("").find("torch") != std::string::npos;
      base.topology = sc["topology"].as<std::string>();
      base.nodes = sc["nodes"].as<int>(1);
      base.gpus_per_node = sc["gpus_per_node"].as<int>(0);
      base.algorithm = algorithm_of(sc["algorithm"].as<std::string>("auto"));
      const YAML::Node m = entry["measured"];
      auto add = [&](double bytes, double busbw, Algorithm a, const std::string& tag) {
        if (bytes < (1 << 20) || !(busbw > 0)) return;
        Point p = base;
        p.id += tag;
        p.bytes = bytes;
        p.busbw_GBps = busbw;
        if (a != Algorithm::automatic || tag.rfind(" default", 0) == 0) p.algorithm = a;
        points.push_back(p);
      };
      auto add_rows = [&](const YAML::Node& rows, const std::string& tag) {
        for (const auto& row : rows)
          if (row["size_bytes"] && row["busbw_GBps"])
            add(row["size_bytes"].as<double>(), row["busbw_GBps"].as<double>(), Algorithm::automatic, tag);
      };
      if (m.IsSequence()) {
        add_rows(m, "");
        continue;
      }
      if (!m.IsMap()) continue;
      for (const auto& kv : m) {
        const auto key = kv.first.as<std::string>();
        if (kv.second.IsSequence()) add_rows(kv.second, " " + key);  // log rows near a size
        // an average over a whole sweep is not the busbw of one size
        if (key.find("busbw_GBps") == std::string::npos || key.rfind("avg_", 0) == 0) continue;
        // "nvls_disabled_*": NCCL fell back to the ring; "default_*": NCCL's own choice.
        Algorithm a = key.rfind("nvls_disabled", 0) == 0 ? Algorithm::ring : Algorithm::automatic;
        if (key.rfind("default", 0) == 0) a = Algorithm::automatic;
        if (kv.second.IsScalar()) {
          double size = kPeakSize;
          if (const YAML::Node w = entry["workload"]["message_size_bytes"]; w && w.IsScalar()) {
            try {
              size = w.as<double>();
            } catch (const YAML::Exception&) {
            }
          }
          try {
            add(size, kv.second.as<double>(), a, " " + key);
          } catch (const YAML::Exception&) {
          }
        } else if (kv.second.IsMap()) {
          for (const auto& sv : kv.second) {
            try {
              add(parse_bytes(sv.first.as<std::string>()), sv.second.as<double>(), a,
                  " " + key + "@" + sv.first.as<std::string>());
            } catch (const std::exception&) {
            }
          }
        }
      }
    }
  }
  return points;
}

// Known misses: points the model does not reach within 10%, each with its reason. They are printed, not asserted,
// and their number is: a new miss fails, and so does a listed one that the model starts to reach.
// - 3 A100 nodes x 4 HDR at 128 MB (nccl-tests#119): the NIC plateau (96 GB/s) is already reached, but NCCL's ring
//   latency model (2(n-1) hops, x1.4 multi-node Simple "plateau effect", data/nccl.yaml) still charges ~290 us.
// - 8x A100, Galvatron's nccl-tests log, 1..64 MiB: one process drives all 8 GPUs (nGpus 8) and the per-call floor is
//   ~70 us (79 us at 1 MiB), far above NCCL's ring/LL latency (15 us); from 128 MiB the ring plateau and fill fit.
// - 8x V100 (HGX-1, 2019 log, one process driving 8 GPUs): 1..4 MiB under a ~48 us per-call floor (model 15 us);
//   32..64 MiB -11%: this NCCL reaches its plateau earlier than the ring fill fitted on A100 / NCCL 2.18 says.
constexpr int kKnownMisses = 12;
bool known_miss(const Point& p) {
  if (p.id.rfind("ar-a100-3node-24gpu-4xHDR-128MB", 0) == 0) return true;
  if (p.id.rfind("ar-v100-sxm2-16gb-8gpu-hybrid-cube-mesh-nccltests-sweep", 0) == 0) return p.bytes <= 64.0 * (1 << 20);
  return p.id.rfind("ar-a100-sxm4-40gb-dgx-8gpu-nccltests-sweep-galvatron", 0) == 0 && p.bytes <= 64.0 * (1 << 20);
}

}  // namespace

TEST_CASE("predicted all-reduce busbw within 10% of published measurements (>= 1 MiB)", "[sim][reference]") {
  const auto points = load_points();
  REQUIRE(!points.empty());
  int misses = 0, known_misses = 0;
  for (const Point& p : points) {
    const auto topo_file = resolve_topology(p.topology, std::filesystem::path(DPSIM_SOURCE_DIR) / "topologies");
    Topology t = load_topology(topo_file);
    t.nodes = p.nodes;
    if (p.gpus_per_node > 0) t = keep_first_gpus(t, p.gpus_per_node);  // as a scenario's cluster.gpus_per_node
    Scenario s = test::scenario_on(t, p.algorithm, Protocol::automatic);
    // Methodology parity: a sweep timed through torch.distributed pays PyTorch's launch of each call.
    if (p.torch_timed)
      s.nccl.framework_launch_overhead_s = load_nccl(data_root() / "data" / "nccl.yaml").framework_launch_overhead_s;
    SimOptions o;
    o.overlap = false;
    o.progress = false;
    const auto bytes = static_cast<long long>(p.bytes);
    const StepResult r = simulate(s, test::one_bucket_plan(s.world_size(), bytes), o);
    const int n = s.world_size();
    const double busbw =
        2.0 * (n - 1) / n * static_cast<double>(bytes) / (r.buckets[0].end_s - r.buckets[0].start_s) / 1e9;
    const double err = (busbw - p.busbw_GBps) / p.busbw_GBps;
    const bool ok = std::abs(err) <= 0.10;
    const bool known = !ok && known_miss(p);
    misses += ok ? 0 : 1;
    std::cout << fmt::format(
        "{:<5} {:<70} {:>10} {:>6}/{:<6} predicted {:8.2f} GB/s measured {:8.2f} GB/s error {:+6.1f}%\n",
        ok      ? "ok"
        : known ? "KNOWN"
                : "MISS",
        p.id, format_bytes(p.bytes), r.buckets[0].algorithm, r.buckets[0].protocol, busbw, p.busbw_GBps, 100 * err);
    INFO(p.id << " at " << p.bytes << " B: predicted " << busbw << " GB/s, measured " << p.busbw_GBps);
    known_misses += known ? 1 : 0;
    if (!known) CHECK(std::abs(err) <= 0.10);
  }
  std::cout << misses << " of " << points.size() << " points outside 10% (" << known_misses << " known misses)\n";
  CHECK(known_misses == kKnownMisses);
}
