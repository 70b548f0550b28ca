#pragma once
// Cost formulas shared by the estimator and the simulator: NCCL's alpha-beta cost of an all-reduce with its
// algorithm/protocol choice (data/nccl.yaml); compute time of plan operations is in dpsim/compute_cost.hpp.
#include <array>
#include <map>
#include <memory>

#include "dpsim/collective_kind.hpp"
#include "dpsim/compute_cost.hpp"
#include "dpsim/plan.hpp"
#include "dpsim/scenario.hpp"

namespace dpsim {

// The ring as NCCL lays it over the topology, reduced to what the closed forms need.
struct FabricSummary {
  int nodes = 1;
  int gpus_per_node = 1;
  int world = 1;
  Arch arch = Arch::hopper;
  CpuVendor cpu_vendor = CpuVendor::intel;
  std::string intra_class;        // nvswitch | pcie | nvlink_mesh
  std::string net_class = "net";  // net (InfiniBand / RoCE) | efa: the inter-node ring_efficiency class
  bool nvls = false;
  double intra_ring_bytes_per_s = 0;  // slowest intra-node ring edge, per direction, nominal
  // PCIe: the ring's edges, and those NCCL stages through host memory (its SHM transport: no peer-to-peer between the
  // two GPUs, nccl_uses_p2p). An SHM hop runs at the host's staged copy rate (host_staged_bytes_per_s, else the GPU
  // link x data/nccl.yaml host_staged_fraction_of_link) x ring_efficiency.shm, whatever PCIe path it takes.
  // intra_ring_bytes_per_s is then the peer-to-peer edges' (the GPU link where every edge is SHM).
  int intra_ring_edges = 0;
  int intra_shm_edges = 0;
  double host_staged_bytes_per_s = 0;  // intra_node.host_staged_bandwidth; 0: not measured
  double pcie_link_bytes_per_s = 0;    // the GPU's PCIe link, per direction
  // What one node's ring traffic can push to the next node, nominal: the slower of its NICs (NCCL runs one
  // channel per NIC, each with an equal share, so the slowest NIC paces them all: NICs x slowest) and, where
  // the ring leaves a leaf (fat tree) or a rail group, that uplink (members x NIC bandwidth / oversubscription).
  double inter_ring_bytes_per_s = 0;
  double nic_ring_bytes_per_s = 0;     // NICs x slowest NIC
  int nics_per_node = 0;               // the node's NICs: NCCL runs one channel per NIC across nodes
  bool sharp = false;                  // the network reduces in its switches (network.sharp: NCCL's CollNet)
  double uplink_ring_bytes_per_s = 0;  // the narrowest uplink the ring crosses; infinity where it crosses none
  double intra_edge_latency_s = 0;     // slowest intra-node ring edge (NVSwitch: GPU -> switch -> GPU)
  // The node-to-node edge: 2 x the slowest NIC + the switch hops (NcclModel network_hops of `network_path`) x the
  // network's link latency (edge_excess_latency in core/algorithms/terms.hpp adds what it exceeds NCCL's table).
  enum class NetworkPath { none, single_switch, within_leaf, across_leaves };
  NetworkPath network_path = NetworkPath::none;
  double nic_latency_s = 0;
  double network_link_latency_s = 0;
  // The platform's NCCL tuner plugin (network.tuner_plugin): its choice replaces NCCL's where it makes one.
  std::shared_ptr<const TunerPlugin> tuner_plugin;
  double ring_bytes_per_s() const;  // nominal bottleneck of the whole ring
  bool uplink_bound() const { return uplink_ring_bytes_per_s < nic_ring_bytes_per_s; }
};

FabricSummary summarize_fabric(const Topology& topology);

// Whether NCCL moves data between two GPUs of a PCIe node peer-to-peer (else through host memory, its SHM transport):
// NCCL v2.30.7 src/graph/paths.cc ncclTopoCheckP2p (:356-368): P2P up to PATH_PXB, i.e. where the two GPUs share a
// PCIe switch, and on AMD x86 with at most 2 GPUs up to PATH_SYS; NCCL_P2P_LEVEL / NCCL_P2P_DISABLE override it
// (intra_node.p2p). Only where the driver allows P2P (checkNvml, :370-385): not on GeForce cards (data/gpus
// pcie_p2p), unless the topology says all_paths (a P2P-enabled driver). Before NCCL 2.23 AMD hosts ran P2P on every
// path (v2.22.3-1 paths.cc:281 "int p2pLevel = PATH_SYS"): all_paths describes them.
bool nccl_uses_p2p(const Topology& topology, bool same_switch);
// A PCIe node's copy from one GPU to another through host memory (NCCL's SHM transport), per direction: the
// topology's host_staged_bandwidth, else its GPU link x data/nccl.yaml host_staged_fraction_of_link.
double host_staged_rate(const FabricSummary& f, const NcclModel& nccl);
// Where that rate comes from, as reports name it.
const char* host_staged_source(const FabricSummary& f);
// A ring hop through host memory: the host-staged rate x ring_efficiency.shm.
double shm_busbw(const FabricSummary& f, const NcclModel& nccl);
// Whether the node's ring runs at its SHM hops' rate rather than its peer-to-peer edges'.
bool intra_shm_bound(const FabricSummary& f, const NcclModel& nccl);

// What the topology's edge latency exceeds the latency NCCL's hwLat table already holds for it (data/nccl.yaml
// table_edge_latency), per step crossing it; 0 for today's fabrics (core/algorithms/terms.cpp). `inter`: the
// node-to-node edge, else the intra-node one.
double edge_excess_latency(const FabricSummary& f, const NcclModel& nccl, bool inter);
double inter_edge_latency(const FabricSummary& f, const NcclModel& nccl);  // 2 x NIC + hops x link latency

struct CollectiveCost {
  Algorithm algorithm = Algorithm::ring;
  Protocol protocol = Protocol::simple;
  double latency_s = 0;
  double busbw_bytes_per_s = 0;  // nccl-tests bus bandwidth this choice reaches
  double time_s = 0;
  double fill_s = 0;  // pipeline fill, part of time_s (NcclModel::ring_fill / nvls_fill); not link-bound
};

// Whether NCCL runs protocol p by default on this fabric (a user's NCCL_PROTO may still ask for it): LL128 only on
// the architectures of data/nccl.yaml ll128_default_architectures, and only where the ring's GPU-to-GPU path is
// NVLink (src/graph/tuning.cc "pEnable &= (graphs[a]->typeIntra <= PATH_NVB)"); LL and Simple always.
bool nccl_enables_by_default(Protocol p, const FabricSummary& fabric, const NcclModel& nccl);

// NCCL's model: time = latency + S * 2(n-1)/n / busbw, minimised over the allowed
// (algorithm, protocol) pairs; `requested` may pin either.
CollectiveCost allreduce_cost(double bytes, const FabricSummary& fabric, const NcclModel& nccl, Collective requested);
// The same for any kind NCCL's model covers here: all_reduce, reduce_scatter, all_gather (`bytes` is the buffer
// size S as nccl-tests prints it; reduce-scatter and all-gather run on the ring). Other kinds throw RuntimeError.
CollectiveCost collective_cost(CollectiveKind kind, double bytes, const FabricSummary& fabric, const NcclModel& nccl,
                               Collective requested);

// The same call issued from PyTorch (torch.distributed, a DDP bucket): NCCL's time + PyTorch's launch of it
// (data/nccl.yaml framework_launch_overhead), the bus bandwidth recomputed over that time.
CollectiveCost launched_from_torch(CollectiveCost cost, CollectiveKind kind, double bytes, int world,
                                   const NcclModel& nccl);

// The same call timed by nccl-tests run with -g N (one process whose one thread drives the node's N GPUs): the thread
// launches the call's kernel on each GPU in turn (data/nccl.yaml single_thread_launch_per_gpu), and a loop of calls
// runs no faster than its launches, which overlap the previous call's run: time = max(NCCL's time, N x launch), the
// bus bandwidth recomputed over it.
CollectiveCost launched_from_one_thread(CollectiveCost cost, CollectiveKind kind, double bytes, int world,
                                        int gpus_per_thread, const NcclModel& nccl);

// How a measurement launched each call: nccl-tests with a process or thread per GPU (NCCL's time alone),
// torch.distributed (launched_from_torch) or nccl-tests -g N (launched_from_one_thread).
enum class CallLaunch { nccl_tests, torch, single_thread };
// `cost` as a caller launching it so times it, on fabric `f`.
CollectiveCost as_launched(const CollectiveCost& cost, CallLaunch launch, CollectiveKind kind, double bytes,
                           const FabricSummary& f, const NcclModel& nccl);

// The back-of-envelope: 2(n-1)/n * S / B, with B the nominal ring bottleneck per direction.
double ideal_ring_allreduce_seconds(double bytes, int world, double bandwidth_bytes_per_s);
double ring_bytes_sent_per_gpu(double bytes, int world);  // 2(n-1)/n * S

}  // namespace dpsim
