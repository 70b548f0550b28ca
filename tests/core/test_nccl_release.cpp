// NCCL's constants that depend on how a call is launched or on the NCCL release (data/nccl.yaml
// single_thread_launch_per_gpu and releases), one test per rule, with the source line each follows.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "../source_dir.hpp"
#include "dpsim/collective_algorithm.hpp"
#include "dpsim/cost.hpp"
#include "dpsim/error.hpp"
#include "dpsim/load.hpp"
#include "dpsim/nccl_release.hpp"

using namespace dpsim;

namespace {

std::string src(const std::string& rel) { return std::string(DPSIM_SOURCE_DIR) + "/" + rel; }

FabricSummary node(const char* topology, int gpus) {
  return summarize_fabric(keep_first_gpus(load_topology(src(std::string("topologies/") + topology + ".yaml")), gpus));
}

CollectiveCost one_thread(double bytes, const FabricSummary& f, const NcclModel& nccl) {
  const CollectiveCost c = allreduce_cost(bytes, f, nccl, {Algorithm::automatic, Protocol::automatic});
  return launched_from_one_thread(c, CollectiveKind::all_reduce, bytes, f.world, f.gpus_per_node, nccl);
}

}  // namespace

TEST_CASE("nccl-tests -g N: a call takes at least N x 5.35 us, one thread's launches (Azure ND A100 v4: 42.8 us / 8)") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  REQUIRE(nccl.single_thread_launch_per_gpu_s == Approx(5.35e-6));
  for (int gpus : {2, 4, 8}) {
    const FabricSummary f = node("a100-8x-nvswitch", gpus);
    const double alone = allreduce_cost(1024, f, nccl, {Algorithm::automatic, Protocol::automatic}).time_s;
    REQUIRE(alone < gpus * 5.35e-6);  // NCCL's own latency is below the launches at 1 KiB on 2..8 GPUs
    const CollectiveCost c = one_thread(1024, f, nccl);
    CHECK(c.time_s == Approx(gpus * 5.35e-6));
    CHECK(c.busbw_bytes_per_s == Approx(ring_bytes_sent_per_gpu(1024, gpus) / c.time_s));
  }
  // a large call runs longer than its launches: NCCL's time unchanged
  const FabricSummary f8 = node("a100-8x-nvswitch", 8);
  const double big = 1 << 30;
  CHECK(one_thread(big, f8, nccl).time_s ==
        allreduce_cost(big, f8, nccl, {Algorithm::automatic, Protocol::automatic}).time_s);
}

TEST_CASE("a release uses the newest tuning table listed at or below it; nccl_version's are the top-level ones") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  CHECK(nccl.tuning_release.empty());
  CHECK(parse_nccl_release("2.18.5") == std::array<int, 3>{2, 18, 5});
  CHECK_FALSE(parse_nccl_release("2.18"));
  CHECK_FALSE(parse_nccl_release("2.18.5-1"));
  CHECK_FALSE(parse_nccl_release("unknown"));
  CHECK(nccl_for_release(nccl, "2.18.3").tuning_release == "2.18.3");
  CHECK(nccl_for_release(nccl, "2.18.5").tuning_release == "2.18.3");  // tuning.cc identical through 2.18.6
  CHECK(nccl_for_release(nccl, "2.20.5").tuning_release == "2.19.1");
  CHECK(nccl_for_release(nccl, "2.22.3").tuning_release == "2.21.5");
  CHECK(nccl_for_release(nccl, "2.26.6").tuning_release == "2.25.1");
  CHECK(nccl_for_release(nccl, "2.27.7").tuning_release == "2.27.3");  // LL128 no longer by architecture
  CHECK(nccl_for_release(nccl, "2.28.9").tuning_release == "2.28.9");
  CHECK(nccl_for_release(nccl, "2.30.7").tuning_release == "2.29.2");  // NVLSTree's Blackwell correction from 2.29
  // the newest table is the top-level constants: every prediction as without a release
  const FabricSummary f = node("h100-8x-nvswitch", 8);
  for (double bytes : {8.0, 65536.0, 1073741824.0})
    CHECK(allreduce_cost(bytes, f, nccl_for_release(nccl, "2.30.7"), {}).time_s ==
          allreduce_cost(bytes, f, nccl, {}).time_s);
}

TEST_CASE("a release outside the tables, or text that is not a release, is refused") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  CHECK_THROWS_AS(nccl_for_release(nccl, "2.17.1"), InputError);
  CHECK_THROWS_WITH(nccl_for_release(nccl, "2.9.9"), Catch::Contains("older than the oldest tuning table") &&
                                                         Catch::Contains("releases 2.18.3 to 2.30.7"));
  CHECK_THROWS_WITH(nccl_for_release(nccl, "2.31.0"), Catch::Contains("newer than the model's nccl_version"));
  CHECK_THROWS_WITH(nccl_for_release(nccl, "latest"), Catch::Contains("\"latest\" is not an NCCL release"));
}

TEST_CASE("NVLS latency by release: 23 us baseLat in 2.18 (v2.18.3-1 tuning.cc:59), 25 us hwLat in 2.30.7 (:161)") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  const FabricSummary f = node("h100-8x-nvswitch", 8);
  const Collective nvls{Algorithm::nvls, Protocol::simple};
  CHECK(allreduce_cost(8, f, nccl, nvls).latency_s == Approx(25e-6));
  CHECK(allreduce_cost(8, f, nccl_for_release(nccl, "2.18.5"), nvls).latency_s == Approx(23e-6));
  CHECK(allreduce_cost(8, f, nccl_for_release(nccl, "2.20.5"), nvls).latency_s == Approx(23e-6));  // hwLat :69
}

TEST_CASE("Hopper's one-node LL cap: 87.7 GB/s through 2.20 (v2.19.1-1 tuning.cc:89), 141 from 2.21.5 (:89)") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  const FabricSummary f = node("h100-8x-nvswitch", 8);
  const Collective ll{Algorithm::ring, Protocol::ll};
  const double huge = 64.0 * (1LL << 30);
  CHECK(allreduce_cost(huge, f, nccl_for_release(nccl, "2.20.5"), ll).busbw_bytes_per_s ==
        Approx(87.7e9).epsilon(0.01));
  CHECK(allreduce_cost(huge, f, nccl_for_release(nccl, "2.21.5"), ll).busbw_bytes_per_s == Approx(141e9).epsilon(0.01));
}

TEST_CASE("NVLSTree's network step: 14 us through 2.28.7, 20.9 us from 2.28.9 (v2.28.9-1 tuning.cc:165)") {
  const NcclModel nccl = load_nccl(src("data/nccl.yaml"));
  Topology t = load_topology(src("topologies/h100-ib-cluster.yaml"));
  t.nodes = 2;
  const FabricSummary f = summarize_fabric(t);
  const Collective tree{Algorithm::nvlstree, Protocol::simple};
  // intraLat 25 + 2 log2i(2) x interLat (tuning.cc:428)
  CHECK(allreduce_cost(8, f, nccl, tree).latency_s == Approx(25e-6 + 2 * 20.9e-6));
  CHECK(allreduce_cost(8, f, nccl_for_release(nccl, "2.21.5"), tree).latency_s == Approx(25e-6 + 2 * 14e-6));
}

TEST_CASE("a scenario's collective.nccl_release applies its release's tables to the whole run") {
  const auto file = std::filesystem::temp_directory_path() / "dpsim-nccl-release.yaml";
  {
    std::ofstream out(file);
    out << "model: " << src("models/gpt2-124m.yaml") << "\n"
        << "training: {micro_batch: 1, sequence_length: 1024}\n"
        << "cluster: {topology: h100-8x-nvswitch}\n"
        << "collective: {nccl_release: 2.18.5}\n";
  }
  const Scenario s = load_scenario(file);
  std::filesystem::remove(file);
  CHECK(s.nccl_release == "2.18.5");
  CHECK(s.nccl.tuning_release == "2.18.3");
  const FabricSummary f = summarize_fabric(s.topology);
  CHECK(allreduce_cost(8, f, s.nccl, {Algorithm::nvls, Protocol::simple}).latency_s == Approx(23e-6));
}
