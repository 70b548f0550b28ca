#include "dpsim/groups.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "dpsim/error.hpp"

namespace dpsim {

const char* to_string(GroupKind kind) {
  switch (kind) {
    case GroupKind::data: return "data";
    case GroupKind::tensor: return "tensor";
    case GroupKind::pipeline: return "pipeline";
    case GroupKind::shard: return "shard";
    case GroupKind::replica: return "replica";
    case GroupKind::embedding: return "embedding";
    case GroupKind::context: return "context";
  }
  return "?";
}

std::optional<GroupKind> group_kind_named(std::string_view name) {
  for (GroupKind k : {GroupKind::data, GroupKind::tensor, GroupKind::pipeline, GroupKind::shard, GroupKind::replica,
                      GroupKind::embedding, GroupKind::context})
    if (name == to_string(k)) return k;
  return std::nullopt;
}

void check_dims(const ParallelDims& d) {
  if (d.data < 1 || d.tensor < 1 || d.pipeline < 1 || d.context < 1)
    throw InputError(fmt::format("parallelism: data {}, tensor {}, context {}, pipeline {}: every degree must be >= 1",
                                 d.data, d.tensor, d.context, d.pipeline));
  if (d.shard > 0 && d.context > 1)
    throw InputError("parallelism: a shard group (HSDP) with context parallelism is not modelled");
  if (d.shard < 0 || (d.shard > 0 && d.data % d.shard != 0))
    throw InputError(
        fmt::format("parallelism: a shard group of {} does not divide the {} data-parallel GPUs", d.shard, d.data));
}

RankCoords coords_of(int rank, const ParallelDims& d) {
  check_dims(d);
  if (rank < 0 || rank >= d.world()) throw RuntimeError(fmt::format("rank {} outside a world of {}", rank, d.world()));
  return {.data = (rank / (d.tensor * d.context)) % d.data,
          .tensor = rank % d.tensor,
          .pipeline = rank / (d.tensor * d.context * d.data),
          .context = (rank / d.tensor) % d.context};
}

int rank_of(const RankCoords& c, const ParallelDims& d) {
  check_dims(d);
  if (c.data < 0 || c.data >= d.data || c.tensor < 0 || c.tensor >= d.tensor || c.pipeline < 0 ||
      c.pipeline >= d.pipeline || c.context < 0 || c.context >= d.context)
    throw RuntimeError(
        fmt::format("coordinates (data {}, tensor {}, context {}, pipeline {}) outside degrees ({}, {}, "
                    "{}, {})",
                    c.data, c.tensor, c.context, c.pipeline, d.data, d.tensor, d.context, d.pipeline));
  return c.tensor + d.tensor * (c.context + d.context * (c.data + d.data * c.pipeline));
}

namespace {
int degree(GroupKind kind, const ParallelDims& d) {
  switch (kind) {
    case GroupKind::data: return d.data * d.context;  // with context parallelism, Megatron's "with cp" group
    case GroupKind::tensor: return d.tensor;
    case GroupKind::context: return d.context;
    case GroupKind::pipeline: return d.pipeline;
    case GroupKind::shard: return d.shard_size();
    case GroupKind::replica: return d.data / d.shard_size();
    case GroupKind::embedding: return d.pipeline > 1 ? 2 : 1;
  }
  return 1;
}
int& coordinate(GroupKind kind, RankCoords& c) {
  return kind == GroupKind::tensor                                     ? c.tensor
         : kind == GroupKind::context                                  ? c.context
         : kind == GroupKind::pipeline || kind == GroupKind::embedding ? c.pipeline
                                                                       : c.data;
}
// The data coordinate of member i of the group of `kind` through data coordinate `data`: a shard group is
// shard_size consecutive data coordinates, a replica group every shard_size-th one from the same position.
int member(GroupKind kind, int data, int i, const ParallelDims& d) {
  if (kind == GroupKind::embedding) return i == 0 ? 0 : d.pipeline - 1;  // the first and the last stage
  const int s = d.shard_size();
  if (kind == GroupKind::shard) return data / s * s + i;
  if (kind == GroupKind::replica) return data % s + i * s;
  return i;
}
}  // namespace

int group_size(GroupKind kind, const ParallelDims& d) {
  check_dims(d);
  return degree(kind, d);
}

ProcessGroup group_of(int rank, GroupKind kind, const ParallelDims& d) {
  RankCoords c = coords_of(rank, d);
  const int data = c.data;
  ProcessGroup g{kind, {}};
  for (int i = 0; i < degree(kind, d); ++i) {
    if (kind == GroupKind::data) {  // data x context: every data and context coordinate (HSDP is refused with context)
      c.context = i % d.context;
      c.data = i / d.context;
    } else {
      coordinate(kind, c) = member(kind, data, i, d);
    }
    g.ranks.push_back(rank_of(c, d));
  }
  std::sort(g.ranks.begin(), g.ranks.end());
  return g;
}

std::vector<ProcessGroup> groups_of(GroupKind kind, const ParallelDims& d) {
  std::vector<ProcessGroup> out;
  std::vector<bool> seen(static_cast<size_t>(d.world()), false);
  for (int r = 0; r < d.world(); ++r) {
    if (seen[static_cast<size_t>(r)]) continue;
    ProcessGroup g = group_of(r, kind, d);
    if (!std::binary_search(g.ranks.begin(), g.ranks.end(), r)) continue;  // embedding: a middle stage is in none
    for (int m : g.ranks) seen[static_cast<size_t>(m)] = true;
    out.push_back(std::move(g));
  }
  return out;
}

GroupPlacement placement(const ProcessGroup& g, const ParallelDims& d, int gpus_per_node) {
  if (gpus_per_node < 1) throw RuntimeError("placement: gpus_per_node must be >= 1");
  if (g.ranks.empty()) throw RuntimeError("placement: empty group");
  std::set<int> nodes;
  for (int r : g.ranks) nodes.insert(r / gpus_per_node);
  GroupPlacement p;
  p.ranks = static_cast<int>(g.ranks.size());
  p.nodes = static_cast<int>(nodes.size());
  p.ranks_per_node = p.ranks / p.nodes;
  // Groups of this kind with a rank on the first node of this group.
  const int node = *nodes.begin();
  std::set<int> sharing;
  for (int r = node * gpus_per_node; r < std::min(d.world(), (node + 1) * gpus_per_node); ++r)
    sharing.insert(group_of(r, g.kind, d).ranks.front());
  p.groups_per_node = static_cast<int>(sharing.size());
  return p;
}

Topology group_topology(const Topology& t, const GroupPlacement& p) {
  if (p.nodes > t.nodes || p.ranks_per_node > t.gpus_per_node)
    throw RuntimeError(fmt::format("a group of {} node(s) x {} GPU(s) does not fit topology {} ({} x {})", p.nodes,
                                   p.ranks_per_node, t.name, t.nodes, t.gpus_per_node));
  Topology g = p.ranks_per_node < t.gpus_per_node ? keep_first_gpus(t, p.ranks_per_node) : t;
  g.nodes = p.nodes;
  return g;
}

}  // namespace dpsim
