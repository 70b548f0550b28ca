// The collective algorithm registry: one descriptor per algorithm, the names every layer parses, the one
// availability rule, and the flows each lays on a FlowSpace (pure core code, no simulator).
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "../source_dir.hpp"
#include "dpsim/collective_algorithm.hpp"
#include "dpsim/load.hpp"

using namespace dpsim;

namespace {

// n nodes of g GPUs behind an NVSwitch, `nics` channels per node: hosts numbered gpus, then switches, then channels.
class TestSpace final : public FlowSpace {
 public:
  TestSpace(int nodes, int gpus, int nics) : nodes_(nodes), gpus_(gpus), nics_(nics) {
    for (int x = 0; x < gpus; ++x) edges_.push_back({x, (x + 1) % gpus, 1.0});
    if (gpus == 1) edges_.clear();
  }
  int nodes() const override { return nodes_; }
  int gpus_per_node() const override { return gpus_; }
  int simulated_nodes() const override { return nodes_; }
  int channels() const override { return nics_; }
  double channel_share() const override { return 1.0 / nics_; }
  int gpu(int node, int local) const override { return node * gpus_ + local; }
  int nvswitch(int node) const override { return nodes_ * gpus_ + node; }
  int channel(int node, int c) const override { return nodes_ * gpus_ + nodes_ + node * nics_ + c; }
  const std::vector<Edge>& intra_ring_edges() const override { return edges_; }

 private:
  int nodes_, gpus_, nics_;
  std::vector<Edge> edges_;
};

std::map<int, double> sent_by(const std::vector<Flow>& flows) {
  std::map<int, double> out;
  for (const Flow& f : flows) out[f.src] += f.bytes;
  return out;
}

}  // namespace

TEST_CASE("every algorithm is registered once, with its names and every function", "[algorithms]") {
  std::set<std::string> names, nccl;
  for (const AlgorithmDescriptor* d : collective_algorithms()) {
    INFO(d->name);
    CHECK(names.insert(d->name).second);
    CHECK(nccl.insert(d->nccl_algo).second);
    CHECK(std::string(d->description).size() > 20);
    CHECK(d->runs != nullptr);
    CHECK(d->unavailable != nullptr);
    CHECK(d->cost != nullptr);
    CHECK(d->flows != nullptr);
    CHECK(d->steps != nullptr);
    CHECK(d->runs(CollectiveKind::all_reduce));
    CHECK(algorithm_named(d->name) == d->id);
    CHECK(std::string(to_string(d->id)) == d->name);
    CHECK(&algorithm_descriptor(d->id) == d);
  }
  CHECK(algorithm_named("auto") == Algorithm::automatic);
  CHECK_FALSE(algorithm_named("collnet"));
  CHECK(algorithm_names(false) == "ring, tree, nvls, nvlstree or collnet_chain");
  CHECK(algorithm_name_list(true).front() == "auto");
}

TEST_CASE("one availability rule: NVLS on one NVSwitch node with enough GPUs, tree across nodes", "[algorithms]") {
  const std::filesystem::path root = std::string(DPSIM_SOURCE_DIR);
  const NcclModel nccl = load_nccl(root / "data" / "nccl.yaml");
  FabricSummary one;
  one.nodes = 1;
  one.gpus_per_node = 8;
  one.world = 8;
  one.nvls = true;
  CHECK(algorithm_available(Algorithm::nvls, CollectiveKind::all_reduce, one, nccl));
  CHECK_FALSE(algorithm_available(Algorithm::nvls, CollectiveKind::reduce_scatter, one, nccl));
  CHECK_FALSE(algorithm_available(Algorithm::tree, CollectiveKind::all_reduce, one, nccl));
  CHECK(algorithm_available(Algorithm::ring, CollectiveKind::all_gather, one, nccl));
  FabricSummary small = one;
  small.gpus_per_node = small.world = nccl.nvls_min_gpus - 1;
  CHECK_FALSE(algorithm_available(Algorithm::nvls, CollectiveKind::all_reduce, small, nccl));
  FabricSummary two = one;
  two.nodes = 2;
  two.world = 16;
  CHECK_FALSE(algorithm_available(Algorithm::nvls, CollectiveKind::all_reduce, two, nccl));
  CHECK(algorithm_available(Algorithm::tree, CollectiveKind::all_reduce, two, nccl));
  // NCCL disables NVLSTree on one node and NVLS across nodes without CollNet (tuning.cc:501-505); the reasons say so
  CHECK(algorithm_available(Algorithm::nvlstree, CollectiveKind::all_reduce, two, nccl));
  CHECK_FALSE(algorithm_available(Algorithm::nvlstree, CollectiveKind::all_reduce, one, nccl));
  CHECK_THAT(algorithm_unavailable_reason(Algorithm::nvls, CollectiveKind::all_reduce, two, nccl),
             Catch::Contains("CollNet") && Catch::Contains("nvlstree"));
  CHECK_THAT(algorithm_unavailable_reason(Algorithm::nvlstree, CollectiveKind::all_reduce, one, nccl),
             Catch::Contains("single node"));
  CHECK_THAT(algorithm_unavailable_reason(Algorithm::tree, CollectiveKind::all_reduce, one, nccl),
             Catch::Contains("2 or more nodes"));
  FabricSummary two_small = two;
  two_small.gpus_per_node = nccl.nvls_min_gpus - 1;
  CHECK_THAT(algorithm_unavailable_reason(Algorithm::nvlstree, CollectiveKind::all_reduce, two_small, nccl),
             Catch::Contains("nvls_min_gpus"));
  CHECK(algorithm_unavailable_reason(Algorithm::ring, CollectiveKind::all_reduce, two, nccl).empty());
  // A pinned algorithm that does not run there is refused by the cost model with the kind named.
  Collective pin;
  pin.algorithm = Algorithm::nvls;
  CHECK_THROWS_WITH(collective_cost(CollectiveKind::reduce_scatter, 1e6, one, nccl, pin),
                    Catch::Contains("not available for reduce_scatter"));
}

TEST_CASE("ring flows: each GPU sends nccl-tests' bytes per rank; across nodes 1/nics per channel", "[algorithms]") {
  const TestSpace node(1, 8, 1);
  for (CollectiveKind kind : {CollectiveKind::all_reduce, CollectiveKind::reduce_scatter, CollectiveKind::all_gather}) {
    const auto sent = sent_by(algorithm_descriptor(Algorithm::ring).flows(node, kind));
    REQUIRE(sent.size() == 8);
    for (const auto& [gpu, bytes] : sent) CHECK(bytes == Approx(bytes_moved_per_rank(kind, 8, 1.0)));
  }
  const NcclModel nccl;
  CHECK(algorithm_descriptor(Algorithm::ring).steps(node, {CollectiveKind::all_reduce, 1e6}, nccl) == 14);
  CHECK(algorithm_descriptor(Algorithm::ring).steps(node, {CollectiveKind::all_gather, 1e6}, nccl) == 7);
  const TestSpace two(2, 8, 4);
  const auto sent = sent_by(algorithm_descriptor(Algorithm::ring).flows(two, CollectiveKind::all_reduce));
  for (int c = 0; c < 4; ++c) CHECK(sent.at(two.channel(0, c)) == Approx(2.0 * 15 / 16 / 4));
}

TEST_CASE("NVLS flows: every GPU sends S to its switch and gets S back", "[algorithms]") {
  const TestSpace node(1, 4, 1);
  const auto flows = algorithm_descriptor(Algorithm::nvls).flows(node, CollectiveKind::all_reduce);
  REQUIRE(flows.size() == 8);
  const auto sent = sent_by(flows);
  for (int x = 0; x < 4; ++x) CHECK(sent.at(x) == 1.0);
  CHECK(sent.at(node.nvswitch(0)) == 4.0);
}

TEST_CASE("tree flows: the double binary tree moves half the data per tree each way", "[algorithms]") {
  const TestSpace nodes(4, 1, 1);
  double up = 0;
  for (const Flow& f : algorithm_descriptor(Algorithm::tree).flows(nodes, CollectiveKind::all_reduce)) up += f.bytes;
  // Two trees over 4 nodes have 3 edges each, every edge half the data in both directions.
  CHECK(up == Approx(2 * 3 * 2 * 0.5));
  // NCCL's trees (trees.cc): 0 -> 2 -> {1, 3} and its mirror 3 -> 1 -> {2, 0}; nodes 1 and 2 are interior in one
  // tree and a leaf of the other, sending 2 S (tree_node_network_bytes), nodes 0 and 3 S
  const auto sent = sent_by(algorithm_descriptor(Algorithm::tree).flows(nodes, CollectiveKind::all_reduce));
  CHECK(sent.at(nodes.channel(0, 0)) == Approx(1.0));
  CHECK(sent.at(nodes.channel(1, 0)) == Approx(2.0));
  CHECK(sent.at(nodes.channel(2, 0)) == Approx(2.0));
  CHECK(sent.at(nodes.channel(3, 0)) == Approx(1.0));
  // 3 nodes: 0 -> 2 -> 1 and, shifted by one, 1 -> 0 -> 2: nodes 0 and 2 send 1.5 S, node 1 S
  const TestSpace three(3, 1, 1);
  const auto sent3 = sent_by(algorithm_descriptor(Algorithm::tree).flows(three, CollectiveKind::all_reduce));
  CHECK(sent3.at(three.channel(0, 0)) == Approx(1.5));
  CHECK(sent3.at(three.channel(1, 0)) == Approx(1.0));
  CHECK(sent3.at(three.channel(2, 0)) == Approx(1.5));
}

namespace {

NcclModel shipped_nccl() { return load_nccl(std::filesystem::path(DPSIM_SOURCE_DIR) / "data" / "nccl.yaml"); }

int steps(Algorithm a, const FlowSpace& space, double bytes, Protocol p, Arch arch = Arch::hopper) {
  return algorithm_descriptor(a).steps(space, {CollectiveKind::all_reduce, bytes, p, arch}, shipped_nccl());
}

}  // namespace

// NCCL's steps per call (data/nccl.yaml step_chunks, NCCL 2.30.7 enqueue.cc calcCollChunking), worked by hand.
TEST_CASE("step counts: the tree's, NVLS's and NVLSTree's chunks as NCCL cuts them", "[algorithms]") {
  const TestSpace four(4, 8, 8);  // a tree channel per NIC: 1/8 of the bytes each
  // Simple: 8 MiB per channel in 512 KiB chunks; LL: 32 KiB chunks.
  CHECK(steps(Algorithm::tree, four, 64.0 * (1 << 20), Protocol::simple) == 16);
  CHECK(steps(Algorithm::tree, four, 64.0 * (1 << 20), Protocol::ll) == 256);
  // LL128: nstepsLL128 = 1 + log2(4) + 0.1 x 8 = 3.8; 8 MiB / 576,000 = 14 < 3.8 x 64 / 8 = 30.4: halve to 288,000
  // (29 < 30.4), to 144,000 (58): ceil(8 MiB / 144,000) = 59.
  CHECK(steps(Algorithm::tree, four, 64.0 * (1 << 20), Protocol::ll128) == 59);
  CHECK(steps(Algorithm::tree, four, 1024, Protocol::simple) == 1);  // a small call is one chunk
  const TestSpace node(1, 8, 1);
  // NVLS, 16 channels on Hopper: 1 GiB -> 64 MiB per channel, not below 64 loops of 8 x 128 KiB: 64 steps.
  CHECK(steps(Algorithm::nvls, node, 1024.0 * (1 << 20), Protocol::simple) == 64);
  // 64 MiB -> 4 MiB per channel, below 64 MiB: chunk 64 KiB, not below 8 x 8 x 64 KiB: 4 MiB / 512 KiB = 8 steps.
  CHECK(steps(Algorithm::nvls, node, 64.0 * (1 << 20), Protocol::simple) == 8);
  // Blackwell on one node: 24 channels (transport/nvls.cc:157), 1.5 GiB -> 64 MiB per channel: 64 steps.
  CHECK(steps(Algorithm::nvls, node, 1536.0 * (1 << 20), Protocol::simple, Arch::blackwell) == 64);
  // NVLSTree from 4 nodes: chunk min(128 KiB, 64 KiB); 1 GiB -> 64 MiB per channel / (8 x 64 KiB) = 128 steps. On
  // two nodes the chunk stays 128 KiB: 64 steps.
  CHECK(steps(Algorithm::nvlstree, four, 1024.0 * (1 << 20), Protocol::simple) == 128);
  CHECK(steps(Algorithm::nvlstree, TestSpace(2, 8, 8), 1024.0 * (1 << 20), Protocol::simple) == 64);
  // The ring: 2(n-1) steps for an all-reduce, n-1 for a reduce-scatter or an all-gather, whatever the size.
  const NcclModel nccl = shipped_nccl();
  CHECK(algorithm_descriptor(Algorithm::ring).steps(four, {CollectiveKind::reduce_scatter, 1e9}, nccl) == 31);
  CHECK(algorithm_descriptor(Algorithm::ring).steps(four, {CollectiveKind::all_gather, 1e3}, nccl) == 31);
}

// A step moves 1 / steps of every flow of the call: over the steps every edge carries the whole call's share (the
// ring's S/n per rank per step; the others' chunk), so step fidelity moves what fast fidelity moves.
TEST_CASE("a step is the call's flows over its steps, for every algorithm and kind", "[algorithms]") {
  const NcclModel nccl = shipped_nccl();
  const TestSpace four(4, 8, 8);
  for (const AlgorithmDescriptor* d : collective_algorithms())
    for (CollectiveKind kind :
         {CollectiveKind::all_reduce, CollectiveKind::reduce_scatter, CollectiveKind::all_gather}) {
      if (!d->runs(kind)) continue;
      INFO(d->name << " " << to_string(kind));
      const StepCall call{kind, 256.0 * (1 << 20), Protocol::simple, Arch::hopper};
      const int n = d->steps(four, call, nccl);
      CHECK(n > 1);
      const auto whole = d->flows(four, kind);
      const auto round = step_round(*d, four, call, nccl);
      REQUIRE(round.size() == whole.size());
      for (size_t i = 0; i < whole.size(); ++i) CHECK(round[i].bytes * n == Approx(whole[i].bytes));
    }
  // The ring's step is S/n per rank.
  const StepCall ar{CollectiveKind::all_reduce, 1e6, Protocol::simple, Arch::hopper};
  for (const Flow& f : step_round(algorithm_descriptor(Algorithm::ring), TestSpace(1, 8, 1), ar, nccl))
    CHECK(f.bytes == Approx(1.0 / 8));
}
