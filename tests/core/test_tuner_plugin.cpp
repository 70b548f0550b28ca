// aws-ofi-nccl's region tuner on p5 (data/tuner_plugins.yaml, from aws-ofi-nccl v1.16.3 src/tuner/nccl_ofi_regions.cpp
// region_init_internal_p5_p5e and region_get_coll_info_internal_v2): which (bytes, ranks) points each region holds,
// and that the cost model takes the plugin's choice over NCCL's own.
#include <catch2/catch.hpp>

#include <string>

#include "../source_dir.hpp"
#include "dpsim/cost.hpp"
#include "dpsim/load.hpp"
#include "dpsim/tuner_plugin.hpp"

using namespace dpsim;

namespace {

std::string src(const std::string& rel) { return std::string(DPSIM_SOURCE_DIR) + "/" + rel; }

const TunerPlugin& p5() {
  const auto p = find_tuner_plugin("aws-ofi-nccl-p5");
  REQUIRE(p);
  return *p;
}

std::string choice(int nodes, double bytes, bool nvls = true) {
  const auto c = tuner_plugin_choice(p5(), CollectiveKind::all_reduce, bytes, nodes, 8, nvls);
  return c ? std::string(to_string(c->algorithm)) + "/" + to_string(c->protocol) : std::string("nccl");
}

const double MiB = 1024.0 * 1024, GiB = 1024 * MiB;

}  // namespace

TEST_CASE("a point on a region's edge is inside it; the ray decides the rest") {
  const TunerRegion square{Algorithm::ring, Protocol::simple, {{0, 0}, {10, 0}, {10, 10}, {0, 10}}};
  const TunerPoint far{100, 100};
  CHECK(in_tuner_region({5, 3}, square,
                        far));  // (a ray through a vertex, e.g. from (5, 5), is not a case the plugin meets)
  CHECK(in_tuner_region({10, 5}, square, far));  // edge
  CHECK(in_tuner_region({0, 0}, square, far));   // vertex
  CHECK_FALSE(in_tuner_region({11, 5}, square, far));
  CHECK_FALSE(in_tuner_region({5, -1}, square, far));
  // A region of zero area (p5's 16-rank NVLSTree line from 31457281 bytes) holds only the points on it.
  const TunerRegion line{Algorithm::nvlstree, Protocol::simple, {{31457281, 16}, {1e11, 16}, {31457281, 16}}};
  CHECK(in_tuner_region({64 * MiB, 16}, line, {1e11, 1e6}));
  CHECK_FALSE(in_tuner_region({64 * MiB, 17}, line, {1e11, 1e6}));
  CHECK_FALSE(in_tuner_region({16 * MiB, 16}, line, {1e11, 1e6}));
}

TEST_CASE("the p5 table: tree/LL128 below the 32-rank vertex at 36 MiB, ring/LL128 to ~1.4 GB, then ring/Simple") {
  struct Case {
    int nodes;
    double bytes;
    const char* expected;
  };
  const Case cases[] = {
      // 4 instances = 32 ranks: vertices {37748736, 32} (tree/LL128 | ring/LL128) and {1610612736, 32} (ring/Simple).
      {4, 32 * MiB, "tree/ll128"},
      {4, 64 * MiB, "ring/ll128"},
      {4, 1 * GiB, "ring/ll128"},
      {4, 2 * GiB, "ring/simple"},
      {4, 8 * GiB, "ring/simple"},
      // 8 instances = 64 ranks: {117440512, 64} and the ring/LL128 corner {2147483648, 64}, on its edge.
      {8, 64 * MiB, "tree/ll128"},
      {8, 128 * MiB, "ring/ll128"},
      {8, 2 * GiB, "ring/ll128"},
      {8, 4 * GiB, "ring/simple"},
      // 32 instances = 256 ranks: tree/LL128 up to 288 MiB ({301989888, 256}), NVLSTree above it except ring/LL128's
      // strip from {1074790400, 256} to {2147483648, 256} (1 GiB itself is 1 MiB below it).
      {32, 256 * MiB, "tree/ll128"},
      {32, 1 * GiB, "nvlstree/simple"},
      {32, 1.5 * GiB, "ring/ll128"},
      {32, 4 * GiB, "nvlstree/simple"}};
  for (const Case& c : cases) {
    INFO(c.nodes << " instances, " << c.bytes << " bytes");
    CHECK(choice(c.nodes, c.bytes) == c.expected);
  }
  CHECK(choice(32, 4 * GiB, false) == "nccl");  // NVLSTree regions skipped without NVLS; ring/Simple starts at ~12 GB
}

TEST_CASE("the p5 tuner leaves 2 instances, other GPU counts and other kinds to NCCL") {
  CHECK(choice(2, 1 * GiB) == "nccl");  // "if (region_ctx->dims.num_nodes <= 2)"
  CHECK_FALSE(tuner_plugin_choice(p5(), CollectiveKind::all_reduce, GiB, 4, 4, true));
  CHECK_FALSE(tuner_plugin_choice(p5(), CollectiveKind::all_gather, GiB, 4, 8, true));
}

TEST_CASE("aws-p5-efa's all-reduce takes the plugin's algorithm where NCCL's tuner would pick another") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  Topology t = load_topology(src("topologies/aws-p5-efa.yaml"));
  t.nodes = 4;
  FabricSummary f = summarize_fabric(t);
  REQUIRE(f.tuner_plugin);
  const CollectiveCost with = allreduce_cost(GiB, f, nccl, {});
  CHECK(with.algorithm == Algorithm::ring);
  CHECK(with.protocol == Protocol::ll128);
  f.tuner_plugin = nullptr;
  const CollectiveCost without = allreduce_cost(GiB, f, nccl, {});
  CHECK(without.algorithm == Algorithm::nvlstree);  // NCCL's own model prefers NVLSTree at 1 GiB here
  // An algorithm asked for is run as asked: the plugin only replaces NCCL's automatic choice.
  f.tuner_plugin = t.network.tuner_plugin;
  CHECK(allreduce_cost(GiB, f, nccl, {Algorithm::tree, Protocol::automatic}).algorithm == Algorithm::tree);
}

TEST_CASE("the p5en table: tree/LL to 256 KiB, tree/LL128, ring/LL128 around 32-512 MiB at 32 ranks, then NVLSTree") {
  const auto p = find_tuner_plugin("aws-ofi-nccl-p5en");
  REQUIRE(p);
  const auto at = [&](int nodes, double bytes) {
    const auto c = tuner_plugin_choice(*p, CollectiveKind::all_reduce, bytes, nodes, 8, true);
    return c ? std::string(to_string(c->algorithm)) + "/" + to_string(c->protocol) : std::string("nccl");
  };
  CHECK(at(4, 64 * 1024) == "tree/ll");
  CHECK(at(4, 8 * MiB) == "tree/ll128");
  CHECK(at(4, 256 * MiB) == "ring/ll128");  // between {33554432, 16}-{536870912, 32} and {536870912, 128}
  // 128 ranks: NVLSTree right of {536870912, 128} up to the edge {536870912, 32}-{6442450944, 256} (3.07 GB
  // there), ring/Simple beyond it.
  CHECK(at(16, 1 * GiB) == "nvlstree/simple");
  CHECK(at(16, 16 * GiB) == "ring/simple");
}
