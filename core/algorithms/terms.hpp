#pragma once
// Terms of NCCL's cost model that several algorithm descriptors share (core/algorithms/*.cpp), and the inter-node
// double binary tree that tree and NVLS both cross.
#include <string>
#include <vector>

#include "dpsim/collective_algorithm.hpp"

namespace dpsim::algorithms {

Fabric intra_fabric(const FabricSummary& f);
double base_latency(const NcclModel& nccl, Algorithm a, Protocol p);
// The effective ring bus bandwidth inside a node / end to end: nominal bottleneck x measured efficiency of its class.
double intra_ring_busbw(const FabricSummary& f, const NcclModel& nccl);
// The node's ring over its GPU links alone (peer-to-peer), as if no hop staged through host memory.
double intra_link_busbw(const FabricSummary& f, const NcclModel& nccl);
double ring_busbw(const FabricSummary& f, const NcclModel& nccl);
double inter_ring_busbw(const FabricSummary& f, const NcclModel& nccl);  // the network side alone
// NCCL's cap on LL bus bandwidth: by architecture on one node, by host CPU vendor and node count across nodes.
double ll_max_busbw(const FabricSummary& f, const NcclModel& nccl);
// A protocol's share of the ring's bus bandwidth (LL also capped).
double protocol_busbw(double busbw, Protocol p, const FabricSummary& f, const NcclModel& nccl);
// A ring/LL call of `bytes` on the channels and threads NCCL gives a call that size (data/nccl.yaml
// ll_call_channels): at most `busbw`, less for calls too small to fill every channel.
double ll_call_busbw(double busbw, double bytes, const FabricSummary& f, const NcclModel& nccl);
// The most bytes one node sends over the network per payload byte in NCCL's double binary tree over `nodes` nodes
// (src/graph/trees.cc ncclGetDtree): each tree carries half the data, and a node sends its half to its parent (the
// reduce) and to each child (the broadcast). 1 on 2 nodes, 1.5 on 3, 2 from 4 on.
double tree_node_network_bytes(int nodes);
// How much less network traffic per node the double binary tree carries than the ring: the ring's 2(n-1)/n over
// tree_node_network_bytes (2(n-1)/n on 2 nodes, about 1.2 on 3, (n-1)/n from 4 on; 1 on one node).
double tree_network_relief(const FabricSummary& f);
// The tree all-reduce's bus bandwidth for `bytes` with protocol p, with NCCL's per-size correction. Two views:
// nccl_tuner, what NCCL's tuning model believes and chooses the algorithm by (tuning.cc:331-335: x0.92 for every
// protocol, LL x1/3.8 capped by llMaxBw, LL128 x120/128, no relief of the network); wire, what the call reaches: the
// ring's bus bandwidth with each protocol's share as on the ring, the network relieved on two nodes (published tree
// sweeps reach more than NCCL's 0.92: ar-h100-2node-1gpu-per-node-4nic-tree-sweep 41.3 GB/s at 32 MiB).
enum class TreeView { nccl_tuner, wire };
double tree_busbw(Protocol p, double bytes, const FabricSummary& f, const NcclModel& nccl, TreeView view);
// One network step of algorithm a: NCCL's hwLat[NET] (the tree's row with one GPU per node) + the plugin's latency
// (twice for Simple) + what the topology's edge exceeds NCCL's table; -1 where NCCL has no such entry.
double inter_hop_latency(Algorithm a, Protocol p, const FabricSummary& f, const NcclModel& nccl);
int log2_floor(int n);  // NCCL's log2i
// NCCL's per-size tree correction (tuning.cc treeCorrectionFactor), 1 outside the table.
// NCCL's treeCorrectionFactor for algorithm `a` (its first tree_correction_entries sizes; 1.0 past them or for an
// algorithm without entries). NVLSTree's applies only where nvlstree_corrected says so.
double tree_correction(const NcclModel& nccl, Algorithm a, Protocol p, double bytes);
bool nvlstree_corrected(const FabricSummary& f, const NcclModel& nccl);

// NCCL's halving of a chunk for small calls (enqueue.cc calcCollChunking): for each rule in turn, halve while a
// channel's bytes / chunk < `depth` x the rule's steps and the chunk is above the rule's bytes.
double halved_chunk(double chunk, double channel_bytes, double depth,
                    const std::vector<NcclStepChunks::Halving>& rules);

// The tree's chunk for a channel of `channel_bytes` (enqueue.cc calcCollChunking: buffer / NCCL_STEPS per protocol,
// the LL128 chunk halved for small calls, data/nccl.yaml step_chunks); 0 where the model has no step_chunks.
double tree_chunk_bytes(double channel_bytes, Protocol p, int nodes, int gpus_per_node, const NcclStepChunks& k);

// NCCL's steps for `bytes` in chunks of `chunk` bytes: ceil(bytes / chunk), at least 1 (1 where chunk is 0: a model
// without data/nccl.yaml step_chunks).
int steps_of_chunks(double bytes, double chunk);

// NVLS inside a node (NVLS and NVLSTree): why the node's NVSwitch domain cannot run it (empty: it can); the
// algorithm bandwidth it reaches (each GPU sends and receives S once, data/nccl.yaml nvls_algbw_per_link); its flows
// (GPU -> NVSwitch -> GPU, and NCCL's double binary tree across nodes), per payload byte.
std::string nvls_domain_unavailable(const FabricSummary& f, const NcclModel& nccl);
double nvls_intra_algbw(const FabricSummary& f, const NcclModel& nccl);
// An NVLS-family call: latency + the NVLS pipeline fill (data/nccl.yaml nvls_fill) + S / algbw.
// `fill` is nvls_fill as it applies to the call's loop (PipelineFill::for_loop).
AlgorithmCost nvls_call(double latency_s, double algbw, double bytes, const PipelineFill& fill);
std::vector<Flow> nvls_flows(const FlowSpace& space, CollectiveKind kind);
// NCCL's steps of an NVLS-family call (enqueue.cc calcCollChunking, data/nccl.yaml step_chunks): the call's bytes split
// over NCCL's NVLS channels, each channel's in loops of one `chunk` per head (the node's GPUs), the chunk first
// lowered by `caps` for small calls.
int nvls_steps(const FlowSpace& space, const StepCall& call, double chunk, const std::vector<NcclStepChunks::Cap>& caps,
               const NcclModel& nccl);
// An NVLS-family chunk lowered for a small call (enqueue.cc:2270-2274 NVLS, :2282-2285 NVLSTree): for each cap in
// turn, below `loops` loops of (heads x chunk) per channel the chunk is at most the cap's bytes.
double capped_nvls_chunk(double chunk, double channel_bytes, int heads, const std::vector<NcclStepChunks::Cap>& caps);
// NVLSTree's chunk for a channel of `channel_bytes` on `nodes` nodes with `heads` heads per node: min(NVLS's chunk,
// the tree's cap from step_chunks.nvlstree_max.from_nodes nodes on) (enqueue.cc:2281, transport/nvls.cc:227-229),
// capped for small calls; 0 where the model has no step_chunks.
double nvlstree_chunk_bytes(double channel_bytes, int nodes, int heads, const NcclStepChunks& k);
// NCCL's NVLSTree heads per node: a head per NIC:GPU pair of the NVLS graph (graph/search.cc:754-770, "NVLS search
// only tries to find NIC:GPU combinations to compute the heads"), at most the node's GPUs and NCCL_MAX_NVLS_ARITY
// (`max_heads`, data/nccl.yaml nvls_fill.loop.max_heads). A topology that states no NICs: one per GPU.
int nvlstree_heads(const FabricSummary& f, int max_heads);

// Flows of a chain of each node's GPUs, 0 - 1 - ... - g-1, per payload byte: S each way on every edge (the tree and
// CollNetChain reduce up it and broadcast back down, pipelined).
void append_intra_node_chain(const FlowSpace& space, std::vector<Flow>& out);

// Flows of NCCL's double binary tree across nodes, per payload byte: each tree moves half the data up for the
// reduce and down for the broadcast, pipelined, so both directions run at once.
void append_inter_node_double_tree(const FlowSpace& space, std::vector<Flow>& out);

}  // namespace dpsim::algorithms
