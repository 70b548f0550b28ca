// NVLS (NVLink SHARP) all-reduce on an NVSwitch that reduces in the switch: every GPU sends its S bytes to the switch
// and receives the reduced S back, at once; algorithm bandwidth flat in the GPU count (data/nccl.yaml
// nvls_algbw_per_link, with its source). Flows across nodes (NVLS tree) also cross the inter-node double binary tree;
// the cost model runs NVLS on one node only (nccl.nvls_min_gpus GPUs or more, the topology's intra_node.nvls).
#include "terms.hpp"

namespace dpsim {

namespace {

using namespace algorithms;

bool runs(CollectiveKind kind) { return kind == CollectiveKind::all_reduce; }

std::string unavailable(const FabricSummary& f, const NcclModel& nccl) {
  if (f.nodes > 1)
    return "across nodes NCCL runs NVLS only over CollNet (InfiniBand SHARP, tuning.cc: NVLS is disabled on several "
           "nodes without collnetEnable), which dpsim does not model; nvlstree is NVLS inside each node with a tree "
           "across nodes";
  return nvls_domain_unavailable(f, nccl);
}

AlgorithmCost cost(CollectiveKind, double bytes, Protocol p, const FabricSummary& f, const NcclModel& nccl) {
  if (p != Protocol::simple) return {};
  const auto lat = nccl.hw_latency(Fabric::nvlink, Algorithm::nvls, f.arch);
  if (!lat || lat->get(p) < 0) return {};
  // baseLat + intraLat: 2.18's tables put NVLS's 23 us in baseLat, later ones in hwLat (data/nccl.yaml releases)
  const double latency = base_latency(nccl, Algorithm::nvls, p) + lat->get(p) +
                         edge_excess_latency(f, nccl, false);  // one pass GPU -> switch -> GPU
  // One node: every GPU is a head, up to NCCL_MAX_NVLS_ARITY (search.cc:1126-1127, 1135-1137), so NCCL's loop
  // (enqueue.cc:2333-2336, nChannels x nHeads x chunk) and the fill grow with the GPUs and the NVLS channels.
  const PipelineFill fill = nccl.nvls_fill.for_loop(nccl.step_chunks.nvls_channels_for(f.arch, false), f.gpus_per_node);
  return nvls_call(latency, nvls_intra_algbw(f, nccl), bytes, fill);  // algbw flat in the GPU count
}

// NCCL's NVLS steps on one node: chunks of NCCL_NVLS_CHUNKSIZE (enqueue.cc:2263-2267), smaller for small calls
// (:2272-2274). A step is one loop of src/device/all_reduce.h's NVLS kernel (RunWorkColl NCCL_ALGO_NVLS, oneNode,
// :410-457): each GPU scatters a chunk per head to the switch, each head's reduce warps pull the switch's sum and
// multicast it back, each GPU gathers the result; pipelined, so a step carries both directions (nvls_flows / steps).
int steps(const FlowSpace& p, const StepCall& call, const NcclModel& nccl) {
  return nvls_steps(p, call, nccl.step_chunks.nvls_bytes, nccl.step_chunks.nvls_caps, nccl);
}

}  // namespace

const AlgorithmDescriptor& nvls_algorithm() {
  static const AlgorithmDescriptor d{Algorithm::nvls,
                                     "nvls",
                                     "NVLS",
                                     "NVLink SHARP: the NVSwitch reduces, each GPU sends and receives S once; one "
                                     "NVSwitch node, all-reduce only",
                                     runs,
                                     unavailable,
                                     cost,
                                     nvls_flows,
                                     steps};
  return d;
}

}  // namespace dpsim
