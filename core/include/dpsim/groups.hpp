#pragma once
// Process groups: where a rank sits in the job (its data, tensor, context and pipeline coordinates, in Megatron-LM's
// order: tensor fastest and inside a node, then context, then data, then pipeline) and which ranks communicate
// together.
// Pure functions of the degrees; ranks fill nodes in order (rank / gpus_per_node is the node).
// Source of the order: Megatron-LM megatron/core/parallel_state.py (RankGenerator, order "tp-cp-ep-dp-pp"),
// ../shared/reference/parallelism-model.md.
#include <optional>
#include <string_view>
#include <vector>

#include "dpsim/scenario.hpp"

namespace dpsim {

struct ParallelDims {
  int data = 1;
  int tensor = 1;
  int pipeline = 1;
  int shard = 0;    // HSDP: data-parallel GPUs per sharding group (consecutive data coordinates); 0: all of them
  int context = 1;  // context parallelism: GPUs that split each sample's sequence (parallelism.context)
  int world() const { return data * tensor * context * pipeline; }
  int shard_size() const { return shard > 0 ? shard : data; }
};

struct RankCoords {
  int data = 0;
  int tensor = 0;
  int pipeline = 0;
  int context = 0;
  bool operator==(const RankCoords&) const = default;
};

// The kinds of group a step communicates over. `data` is the data-parallel group (DDP's all-reduce). HSDP splits it
// in two (torch/distributed/fsdp/_init_utils.py `_init_intra_and_inter_node_groups`): `shard`, the data-parallel
// ranks of one sharding group (FSDP's process_group, consecutive data coordinates: a node by default), and
// `replica`, the ranks at the same position of every sharding group (FSDP's _inter_node_pg). With pipeline stages,
// `embedding` is Megatron-LM's embedding group: the first and the last stage's ranks at the same data and tensor
// position, which all-reduce a tied word embedding's gradient (megatron/training.py:376-397 @6985e58938).
// `context` is context parallelism's group: the ranks at the same data, tensor and pipeline position that split one
// sample's sequence and pass its keys and values round a ring. With context parallelism the gradients are reduced
// over data x context GPUs (Megatron-Core parallel_state.py's data-parallel group "with context parallelism", which
// its DDP and distributed optimizer use; torchtitan's FSDP mesh "dp_shard_cp"): `data` is that group.
enum class GroupKind { data, tensor, pipeline, shard, replica, embedding, context };
const char* to_string(GroupKind kind);
std::optional<GroupKind> group_kind_named(std::string_view name);  // inverse of to_string

// Throws InputError unless every degree is >= 1 and the shard group divides the data-parallel GPUs.
void check_dims(const ParallelDims& dims);
RankCoords coords_of(int rank, const ParallelDims& dims);
int rank_of(const RankCoords& coords, const ParallelDims& dims);

struct ProcessGroup {
  GroupKind kind = GroupKind::data;
  std::vector<int> ranks;  // ascending; position in the group = index in this list
  bool operator==(const ProcessGroup&) const = default;
};

// The group of `kind` that holds `rank` (embedding: a middle stage's rank is in none; this is its position's pair).
ProcessGroup group_of(int rank, GroupKind kind, const ParallelDims& dims);
// How many ranks a group of `kind` holds (every group of a kind is the same size), without listing them.
int group_size(GroupKind kind, const ParallelDims& dims);
// Every group of `kind` (disjoint, covering the world but for embedding's middle stages), ordered by lowest rank.
std::vector<ProcessGroup> groups_of(GroupKind kind, const ParallelDims& dims);

// How a group lies on the nodes: the fabric its traffic crosses. Groups of one kind run their collectives at
// the same time, so `groups_per_node` of them share each node's NICs and switch uplinks.
struct GroupPlacement {
  int ranks = 1;
  int nodes = 1;            // nodes the group spans
  int ranks_per_node = 1;   // the group's ranks on each of them (the same on every node, by construction)
  int groups_per_node = 1;  // groups of this kind with ranks on one node
  bool intra_node() const { return nodes == 1; }
};
GroupPlacement placement(const ProcessGroup& group, const ParallelDims& dims, int gpus_per_node);

// The topology one group's collectives run on: its nodes, its ranks per node (the first GPUs of each, which on a
// symmetric node stand for any of them) and the NICs serving those GPUs, so that groups sharing a node share its
// NICs in proportion. A group spanning the whole world sees the topology unchanged.
Topology group_topology(const Topology& topology, const GroupPlacement& placement);

}  // namespace dpsim
