// Process groups (Megatron-LM's rank order) and the collective kinds' nccl-tests factors.
#include <catch2/catch.hpp>

#include <set>
#include <stdexcept>
#include <string>

#include "dpsim/collective_kind.hpp"
#include "dpsim/error.hpp"
#include "dpsim/groups.hpp"
#include "dpsim/load.hpp"

using namespace dpsim;

TEST_CASE("rank coordinates: tensor fastest, then data, then pipeline") {
  const ParallelDims d{.data = 4, .tensor = 2, .pipeline = 2};
  CHECK(coords_of(0, d) == RankCoords{0, 0, 0});
  CHECK(coords_of(1, d) == RankCoords{.data = 0, .tensor = 1, .pipeline = 0});
  CHECK(coords_of(2, d) == RankCoords{.data = 1, .tensor = 0, .pipeline = 0});
  CHECK(coords_of(5, d) == RankCoords{.data = 2, .tensor = 1, .pipeline = 0});
  CHECK(coords_of(8, d) == RankCoords{.data = 0, .tensor = 0, .pipeline = 1});
  for (int r = 0; r < d.world(); ++r) CHECK(rank_of(coords_of(r, d), d) == r);
  CHECK_THROWS(coords_of(16, d));
  CHECK_THROWS(check_dims({.data = 0}));
}

TEST_CASE("groups of each kind partition the world") {
  const ParallelDims d{.data = 8, .tensor = 8, .pipeline = 2};
  for (GroupKind kind : {GroupKind::data, GroupKind::tensor, GroupKind::pipeline}) {
    const auto groups = groups_of(kind, d);
    std::set<int> seen;
    for (const auto& g : groups)
      for (int r : g.ranks) CHECK(seen.insert(r).second);
    CHECK(static_cast<int>(seen.size()) == d.world());
  }
  CHECK(groups_of(GroupKind::tensor, d).size() == 16);
  CHECK(group_of(9, GroupKind::tensor, d).ranks == std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15});
  CHECK(group_of(3, GroupKind::data, d).ranks == std::vector<int>{3, 11, 19, 27, 35, 43, 51, 59});
  CHECK(group_of(3, GroupKind::pipeline, d).ranks == std::vector<int>{3, 67});
  CHECK(group_kind_named("tensor") == GroupKind::tensor);
  CHECK(group_kind_named("context") == GroupKind::context);
  CHECK_FALSE(group_kind_named("expert").has_value());
}

TEST_CASE("context parallelism: its rank sits between tensor and data; gradients reduce over data x context") {
  // Megatron-LM's order "tp-cp-ep-dp-pp": t8 x c2 x d4 x p2 on 8-GPU nodes puts a context group's two ranks on two
  // nodes, at the same tensor position.
  const ParallelDims d{.data = 4, .tensor = 8, .pipeline = 2, .context = 2};
  CHECK(d.world() == 128);
  CHECK(coords_of(8, d) == RankCoords{.data = 0, .tensor = 0, .pipeline = 0, .context = 1});
  CHECK(coords_of(16, d) == RankCoords{.data = 1, .tensor = 0, .pipeline = 0, .context = 0});
  CHECK(coords_of(64, d) == RankCoords{.data = 0, .tensor = 0, .pipeline = 1, .context = 0});
  for (int r = 0; r < d.world(); ++r) CHECK(rank_of(coords_of(r, d), d) == r);
  CHECK(group_of(3, GroupKind::context, d).ranks == std::vector<int>{3, 11});
  CHECK(group_of(3, GroupKind::data, d).ranks == std::vector<int>{3, 11, 19, 27, 35, 43, 51, 59});
  CHECK(group_size(GroupKind::data, d) == 8);
  CHECK(group_of(3, GroupKind::pipeline, d).ranks == std::vector<int>{3, 67});
  for (GroupKind kind : {GroupKind::data, GroupKind::tensor, GroupKind::pipeline, GroupKind::context}) {
    std::set<int> seen;
    for (const auto& g : groups_of(kind, d)) {
      CHECK(static_cast<int>(g.ranks.size()) == group_size(kind, d));
      for (int r : g.ranks) CHECK(seen.insert(r).second);
    }
    CHECK(static_cast<int>(seen.size()) == d.world());
  }
  const GroupPlacement cp = placement(group_of(0, GroupKind::context, d), d, 8);
  CHECK(cp.nodes == 2);
  CHECK(cp.groups_per_node == 8);  // the node's eight context groups share its NICs
  CHECK_THROWS_AS(check_dims({.data = 4, .shard = 2, .context = 2}), InputError);  // HSDP with context: not modelled
}

TEST_CASE("group_size: the size of every group of a kind, shard and replica and embedding included") {
  const ParallelDims d{.data = 8, .tensor = 2, .pipeline = 3, .shard = 4};
  for (GroupKind kind : {GroupKind::data, GroupKind::tensor, GroupKind::pipeline, GroupKind::shard, GroupKind::replica,
                         GroupKind::embedding})
    for (const auto& g : groups_of(kind, d)) CHECK(static_cast<int>(g.ranks.size()) == group_size(kind, d));
  CHECK(group_size(GroupKind::replica, d) == 2);
  CHECK(group_size(GroupKind::embedding, d) == 2);
  CHECK(group_size(GroupKind::embedding, ParallelDims{.data = 4}) == 1);
  CHECK_THROWS(group_size(GroupKind::data, ParallelDims{.data = 0}));
}

TEST_CASE("placement: a tensor group inside a node, a data group across nodes through one GPU's NIC") {
  const ParallelDims d{.data = 8, .tensor = 8, .pipeline = 1};
  const GroupPlacement tp = placement(group_of(0, GroupKind::tensor, d), d, 8);
  CHECK(tp.intra_node());
  CHECK(tp.ranks_per_node == 8);
  CHECK(tp.groups_per_node == 1);
  const GroupPlacement dp = placement(group_of(0, GroupKind::data, d), d, 8);
  CHECK(dp.nodes == 8);
  CHECK(dp.ranks_per_node == 1);
  CHECK(dp.groups_per_node == 8);  // eight data groups share each node's NICs
  const ParallelDims ddp{.data = 64};
  const GroupPlacement all = placement(group_of(0, GroupKind::data, ddp), ddp, 8);
  CHECK(all.nodes == 8);
  CHECK(all.ranks_per_node == 8);
  CHECK(all.groups_per_node == 1);
}

TEST_CASE("group topology: the whole world sees the topology; a one-GPU-per-node group keeps that GPU's NIC") {
  const Topology t = sized_topology(load_topology(data_root() / "topologies" / "h100-ib-rail.yaml"), 4, 8,
                                    [](const std::string& m) { throw std::runtime_error(m); });
  const ParallelDims ddp{.data = 32};
  const Topology whole = group_topology(t, placement(group_of(0, GroupKind::data, ddp), ddp, 8));
  CHECK(whole.nodes == 4);
  CHECK(whole.gpus_per_node == 8);
  CHECK(whole.nics.size() == t.nics.size());
  const ParallelDims tp8{.data = 4, .tensor = 8};
  const Topology dp = group_topology(t, placement(group_of(0, GroupKind::data, tp8), tp8, 8));
  CHECK(dp.nodes == 4);
  CHECK(dp.gpus_per_node == 1);
  REQUIRE(dp.nics.size() == 1);
  CHECK(dp.nics[0].gpus == std::vector<int>{0});
  const Topology tp = group_topology(t, placement(group_of(0, GroupKind::tensor, tp8), tp8, 8));
  CHECK(tp.nodes == 1);
  CHECK(tp.gpus_per_node == 8);
}

TEST_CASE("collective kinds: nccl-tests' bus factors and bytes per rank") {
  CHECK(bus_factor(CollectiveKind::all_reduce, 8) == Approx(2.0 * 7 / 8));
  CHECK(bus_factor(CollectiveKind::reduce_scatter, 8) == Approx(7.0 / 8));
  CHECK(bus_factor(CollectiveKind::all_gather, 4) == Approx(3.0 / 4));
  CHECK(bus_factor(CollectiveKind::broadcast, 4) == 1.0);
  CHECK(bus_factor(CollectiveKind::send, 2) == 1.0);
  CHECK(bus_factor(CollectiveKind::all_reduce, 1) == 0.0);
  CHECK(bytes_moved_per_rank(CollectiveKind::all_reduce, 8, 16.06e9) == Approx(28.105e9));
  CHECK(collective_kind_named("reduce_scatter") == CollectiveKind::reduce_scatter);
  CHECK_FALSE(collective_kind_named("allreduce").has_value());
  CHECK_THROWS(bus_factor(CollectiveKind::all_gather, 0));
}
