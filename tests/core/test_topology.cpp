// The topology rules checked once in core (check_topology), and the node's routes as pure functions.
#include <unistd.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "../source_dir.hpp"
#include "dpsim/cost.hpp"
#include "dpsim/error.hpp"
#include "dpsim/load.hpp"
#include "dpsim/topology.hpp"

using namespace dpsim;

namespace {

Link link(double gbps) { return Link{gbps * 1e9, 1e-6}; }

// GPUs 0-1-2-3 in a square; 0-1 doubled (two NVLinks), 1-2 narrow.
Topology square_mesh() {
  Topology t;
  t.name = "square";
  t.file = "square.yaml";
  t.gpus_per_node = 4;
  t.intra.kind = IntraKind::nvlink_mesh;
  t.intra.mesh = {{0, 1, link(25)}, {0, 1, link(25)}, {1, 2, link(10)}, {2, 3, link(50)}, {3, 0, link(50)}};
  return t;
}

}  // namespace

TEST_CASE("check_topology: the loader's rules on a topology built in code, naming the file", "[topology]") {
  CHECK_NOTHROW(check_topology(square_mesh()));
  Topology t = square_mesh();
  t.gpus_per_node = 0;
  CHECK_THROWS_AS(check_topology(t), InputError);
  t = square_mesh();
  t.intra.mesh.push_back({2, 2, link(10)});
  CHECK_THROWS_WITH(check_topology(t),
                    "square.yaml: intra_node.links[5].gpus: a mesh link joins exactly two "
                    "different GPUs of the node's 4");
  t = square_mesh();
  t.intra.mesh.pop_back();
  t.intra.mesh.pop_back();  // GPU 3 cut off
  CHECK_THROWS_WITH(check_topology(t), Catch::Contains("GPU 3 has no NVLink route to GPU 0"));
  t = square_mesh();
  t.nodes = 2;
  CHECK_THROWS_WITH(check_topology(t), "square.yaml: 2 nodes but no nics: GPUs on different nodes have no route");
  t.nics.push_back(Nic{{0, 1, 2, 3}, link(0)});
  t.network.kind = NetworkKind::single_switch;
  CHECK_THROWS_WITH(check_topology(t), "square.yaml: nics[0]: a link needs a bandwidth above 0");
  t.nics[0].link = link(50);
  CHECK_NOTHROW(check_topology(t));
}

TEST_CASE("mesh routes: parallel links add up; fewest hops, then the widest bottleneck", "[topology]") {
  const MeshRoutes r = mesh_routes(square_mesh().intra, 4);
  CHECK(r.bytes_per_s[0][1] == 50e9);
  CHECK(r.bytes_per_s[1][0] == 50e9);
  CHECK(r.bytes_per_s[0][2] == 0);
  CHECK(r.path[0][1] == std::vector<int>{0, 1});
  // 0 -> 2: via 1 (bottleneck 10 GB/s) or via 3 (50 GB/s): two hops either way, the wider wins.
  CHECK(r.path[0][2] == std::vector<int>{0, 3, 2});
  CHECK(r.path[1][3] == std::vector<int>{1, 0, 3});
  CHECK(r.path[2][2].empty());
}

TEST_CASE("intra-node ring edges: a cycle on a switch, shares by bandwidth on a mesh", "[topology]") {
  IntraNode sw;
  sw.kind = IntraKind::nvswitch;
  const auto cycle = intra_ring_edges(sw, 4);
  REQUIRE(cycle.size() == 4);
  CHECK(cycle[3].from == 3);
  CHECK(cycle[3].to == 0);
  CHECK(intra_ring_edges(sw, 1).empty());
  const auto mesh = intra_ring_edges(square_mesh().intra, 4);
  std::vector<double> out(4, 0.0);
  for (const auto& e : mesh) out[static_cast<size_t>(e.from)] += e.share;
  for (double s : out) CHECK(s == Approx(1.0));  // each GPU's ring traffic spread over its links
}

TEST_CASE("shipped topologies add no latency to NCCL's table but the Ethernet one; a slower link does", "[topology]") {
  const std::filesystem::path root = std::string(DPSIM_SOURCE_DIR);
  const NcclModel nccl = load_nccl(root / "data" / "nccl.yaml");
  for (const auto& e : std::filesystem::directory_iterator(root / "topologies")) {
    if (e.path().extension() != ".yaml") continue;
    Topology t = load_topology(e.path());
    if (t.nics.size() > 0) t.nodes = 64;  // across leaves where the fabric has them
    const FabricSummary f = summarize_fabric(t);
    INFO(e.path().filename().string() << ": intra edge " << f.intra_edge_latency_s * 1e6 << " us, inter edge "
                                      << inter_edge_latency(f, nccl) * 1e6 << " us");
    CHECK(edge_excess_latency(f, nccl, false) == 0);
    // pcie-ethernet-cluster: RoCE NICs of 2 us and 1 us Ethernet hops, 4 us above the InfiniBand path.
    const bool ethernet = e.path().filename() == "pcie-ethernet-cluster.yaml";
    CHECK(edge_excess_latency(f, nccl, true) == Approx(ethernet ? 4e-6 : 0.0).margin(1e-12));
  }
  Topology t = load_topology(root / "topologies" / "h100-ib-cluster.yaml");
  t.nodes = 64;
  const FabricSummary today = summarize_fabric(t);
  t.network.link_latency_s = 5e-6;  // a second site: 5 us per switch hop
  const FabricSummary far = summarize_fabric(t);
  const double excess = edge_excess_latency(far, nccl, true);
  CHECK(excess == Approx(inter_edge_latency(far, nccl) - nccl.table_edge_latency_s.at("net")));
  CHECK(excess > 0);
  // A latency-bound all-reduce (8 KiB, ring pinned) pays it on each of its 2 (nodes - 1) network steps.
  const Collective ring{Algorithm::ring, Protocol::ll};
  const double a = collective_cost(CollectiveKind::all_reduce, 8192, today, nccl, ring).latency_s;
  const double b = collective_cost(CollectiveKind::all_reduce, 8192, far, nccl, ring).latency_s;
  CHECK(b - a == Approx(2 * 63 * excess));
}

TEST_CASE("every shipped topology loads, names a GPU of the catalog and prices an all-reduce", "[topology]") {
  const std::filesystem::path root = std::string(DPSIM_SOURCE_DIR);
  const NcclModel nccl = load_nccl(root / "data" / "nccl.yaml");
  std::set<std::string> catalog;
  for (const GpuSpec& g : load_gpu_catalog()) catalog.insert(g.key);
  int shipped = 0;
  for (const auto& e : std::filesystem::directory_iterator(root / "topologies")) {
    if (e.path().extension() != ".yaml") continue;
    INFO(e.path().filename().string());
    const Topology t = load_topology(e.path());
    ++shipped;
    CHECK(catalog.count(t.gpu.key) == 1);
    CHECK(t.gpu.peak_fp16_flops_per_s > 0);
    CHECK(t.gpu.cublas_workspace_bytes > 0);
    // `inspect topology NAME` prints this: a 1 GiB all-reduce of NCCL's choice, finite and no faster than the
    // GPU's own memory could read the buffer.
    const FabricSummary f = summarize_fabric(t);
    const CollectiveCost c = allreduce_cost(1 << 30, f, nccl, {Algorithm::automatic, Protocol::automatic});
    CHECK(std::isfinite(c.time_s));
    CHECK(c.time_s > (1 << 30) / t.gpu.memory_bandwidth_bytes_per_s);
  }
  CHECK(shipped >= 33);  // issue 17's boxes included
}

TEST_CASE("Blackwell and Turing take NCCL's rows of their compute capability and PyTorch's cuBLAS workspace") {
  const NcclModel nccl = load_nccl(std::filesystem::path(DPSIM_SOURCE_DIR) / "data" / "nccl.yaml");
  // tuning.cc: compCapIndex = cc >= 100 ? Blackwell : cc >= 90 ? Hopper : cc >= 80 ? Ampere : Volta (sm75 included)
  CHECK(nccl.ll_max_busbw_bytes_per_s.at(Arch::blackwell) == Approx(282e9));  // llMaxBws {2*141.0, ...}
  CHECK(nccl.per_channel_max_ll128_busbw_bytes_per_s.at(Arch::blackwell) == Approx(40e9));
  CHECK(nccl.ll_max_busbw_bytes_per_s.at(Arch::turing) == nccl.ll_max_busbw_bytes_per_s.at(Arch::volta));
  CHECK(nccl.per_channel_max_ll128_busbw_bytes_per_s.at(Arch::turing) ==
        nccl.per_channel_max_ll128_busbw_bytes_per_s.at(Arch::volta));
  for (const char* key : {"B200", "RTX-5090", "RTX-PRO-6000"}) {
    INFO(key);
    const GpuSpec g = load_gpu(key);
    CHECK(g.arch == Arch::blackwell);
    CHECK(g.cublas_workspace_bytes == Approx(32.0 * 1024 * 1024));  // PyTorch's use32mb: major 9, 10, 11, 12
  }
  const GpuSpec turing = load_gpu("RTX-2080-Ti");
  CHECK(turing.arch == Arch::turing);
  CHECK_FALSE(turing.peak_bf16_flops_per_s > 0);  // no bf16 on Turing
  CHECK(turing.cublas_workspace_bytes == Approx(8320.0 * 1024));
  CHECK(arch_named("blackwell") == Arch::blackwell);
  CHECK_FALSE(arch_named("rubin").has_value());
}

TEST_CASE("a GPU is read from its own catalog file: a broken entry of another GPU does not stop it", "[topology]") {
  namespace fs = std::filesystem;
  const fs::path src = std::string(DPSIM_SOURCE_DIR);
  const fs::path root = fs::temp_directory_path() / fmt::format("dpsim-gpu-catalog-{}", ::getpid());
  fs::create_directories(root / "data" / "gpus");
  fs::copy_file(src / "data" / "gpus.yaml", root / "data" / "gpus.yaml");
  fs::copy_file(src / "data" / "gpus" / "H100-SXM.yaml", root / "data" / "gpus" / "H100-SXM.yaml");
  std::ofstream(root / "data" / "gpus" / "BROKEN.yaml") << "name: Broken\narch: not-an-arch\n";
  const char* before = std::getenv("DPSIM_DATA_DIR");
  const std::string saved = before ? before : "";
  setenv("DPSIM_DATA_DIR", root.c_str(), 1);
  CHECK(load_gpu("H100-SXM").peak_bf16_flops_per_s == Approx(989e12));
  CHECK(load_gpu("H100-SXM").cublas_workspace_bytes == Approx(32.0 * 1024 * 1024));  // data/gpus.yaml's kernels
  // The keys are the files': an unknown one lists them; the whole catalog (inspect gpus) reads the broken one.
  CHECK_THROWS_WITH(load_gpu("A100-SXM-80GB"), Catch::Contains(fmt::format("(the GPUs in {}: BROKEN, H100-SXM;",
                                                                           (root / "data" / "gpus").string())));
  CHECK_THROWS_WITH(load_gpu_catalog(), Catch::StartsWith((root / "data" / "gpus" / "BROKEN.yaml").string() +
                                                          ":2: arch: \"not-an-arch\" is not one of"));
  if (before)
    setenv("DPSIM_DATA_DIR", saved.c_str(), 1);
  else
    unsetenv("DPSIM_DATA_DIR");
  fs::remove_all(root);
}
