#pragma once
// Terms of NCCL's cost model that several algorithm descriptors share (core/algorithms/*.cpp), and the inter-node
// double binary tree that tree and NVLS both cross.
#include <vector>

#include "dpsim/collective_algorithm.hpp"

namespace dpsim::algorithms {

Fabric intra_fabric(const FabricSummary& f);
double base_latency(const NcclModel& nccl, Algorithm a, Protocol p);
// The effective ring bus bandwidth inside a node / end to end: nominal bottleneck x measured efficiency of its class.
double intra_ring_busbw(const FabricSummary& f, const NcclModel& nccl);
double ring_busbw(const FabricSummary& f, const NcclModel& nccl);
// A protocol's share of the bus bandwidth (LL also capped per architecture).
double protocol_busbw(double busbw, Protocol p, const FabricSummary& f, const NcclModel& nccl);
// NCCL's per-size tree correction (tuning.cc treeCorrectionFactor), 1 outside the table.
double tree_correction(const NcclModel& nccl, Protocol p, double bytes);

// The step count of an algorithm without a per-step form: one round of its flows (tree, NVLS).
int one_round(const FlowSpace& space, CollectiveKind kind);

// Flows of NCCL's double binary tree across nodes, per payload byte: each tree moves half the data up for the
// reduce and down for the broadcast, pipelined, so both directions run at once.
void append_inter_node_double_tree(const FlowSpace& space, std::vector<Flow>& out);

}  // namespace dpsim::algorithms
