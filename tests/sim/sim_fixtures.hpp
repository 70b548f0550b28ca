#pragma once
// Topologies and plans built in code for the simulator tests (no files needed but data/).
#include <string>

#include "dpsim/load.hpp"
#include "dpsim/plan.hpp"
#include "dpsim/scenario.hpp"

namespace dpsim::test {

inline Link link(double gbps, double us = 1) { return Link{gbps * 1e9, us * 1e-6}; }

inline Topology nvswitch_node(int gpus, double gbps = 450) {
  Topology t;
  t.name = "test-nvswitch";
  t.file = "(test)";
  t.gpu = load_gpu("H100-SXM");
  t.gpus_per_node = gpus;
  t.intra.kind = IntraKind::nvswitch;
  t.intra.gpu_link = link(gbps);
  return t;
}

// `per_switch` GPUs behind each PCIe switch; switches alternate between two root complexes when `sockets`.
inline Topology pcie_node(int gpus, int per_switch, double gpu_gbps, double uplink_gbps, bool sockets = false,
                          double socket_gbps = 0) {
  Topology t;
  t.name = "test-pcie";
  t.file = "(test)";
  t.gpu = load_gpu("A100-PCIE-80GB");
  t.gpus_per_node = gpus;
  t.intra.kind = IntraKind::pcie;
  t.intra.p2p = PcieP2p::all_paths;  // peer-to-peer on every path: the PCIe tree's flows (SHM: tests/core)
  t.intra.gpu_link = link(gpu_gbps);
  const int switches = (gpus + per_switch - 1) / per_switch;
  for (int s = 0; s < switches; ++s) {
    PcieSwitch sw;
    sw.name = "sw" + std::to_string(s);
    sw.root = sockets && s >= switches / 2 ? "cpu1" : "cpu0";
    for (int x = s * per_switch; x < std::min(gpus, (s + 1) * per_switch); ++x) sw.gpus.push_back(x);
    sw.uplink = link(uplink_gbps);
    t.intra.switches.push_back(sw);
  }
  if (sockets) t.intra.inter_socket = link(socket_gbps);
  return t;
}

// Nodes of 8 NVSwitch GPUs, `nics` NICs per node (8 / nics GPUs each), fat tree.
inline Topology ib_cluster(int nodes, int nics = 8, double nic_gbps = 50, int leaf_radix = 4,
                           double oversubscription = 1, NetworkKind kind = NetworkKind::fat_tree) {
  Topology t = nvswitch_node(8);
  t.name = "test-ib";
  t.nodes = nodes;
  for (int c = 0; c < nics; ++c) {
    Nic n;
    for (int x = c * (8 / nics); x < (c + 1) * (8 / nics); ++x) n.gpus.push_back(x);
    n.link = link(nic_gbps);
    t.nics.push_back(n);
  }
  t.network.kind = kind;
  t.network.link_latency_s = 0.5e-6;
  t.network.leaf_radix = leaf_radix;
  t.network.oversubscription = oversubscription;
  return t;
}

inline Scenario scenario_on(const Topology& t, Algorithm a = Algorithm::ring, Protocol p = Protocol::simple) {
  Scenario s;
  s.name = "test";
  s.file = "(test)";
  s.topology = t;
  s.nccl = load_nccl(data_root() / "data" / "nccl.yaml");
  s.nccl.framework_launch_overhead_s = 0;  // NCCL-level checks: nccl-tests timings exclude PyTorch's launch
  s.collective = {a, p};
  if (!(t.gpu.peak_bf16_flops_per_s > 0)) s.training.param_dtype = s.training.grad_dtype = Dtype::fp16;  // Volta
  return s;
}

// One op, one bucket of `bytes`: the bucket's duration is one all-reduce of `bytes`.
inline StepPlan one_bucket_plan(int world, long long bytes) {
  StepPlan p;
  p.scenario = "test";
  p.world_size = world;
  p.dims.data = world;
  p.parameters = bytes / 2;
  p.gradient_bytes = bytes;
  PlanOp op;
  op.name = "op";
  op.forward_flops = 1e9;
  op.backward_flops = 2e9;
  op.grads = {0};
  p.ops = {op};
  p.backward_order = {0};
  Grad g;
  g.name = "w";
  g.numel = bytes / 2;
  g.bytes = bytes;
  p.grads = {g};
  Bucket b;
  b.index = 0;
  b.grads = {0};
  b.bytes = bytes;
  b.ready_after_backward_op = 0;
  p.buckets = {b};
  p.optimizer.parameters = bytes / 2;
  p.optimizer.bytes = 0;
  return p;
}

}  // namespace dpsim::test
