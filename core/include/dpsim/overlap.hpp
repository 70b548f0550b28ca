#pragma once
// Compute beside a collective. NCCL's kernel holds one SM per channel it runs on (a CTA per channel), so the compute
// that overlaps it runs on the GPU's other SMs. NVLS and NVLSTree run on NCCL's NVLS channels (data/nccl.yaml
// step_chunks.nvls_channels, transport/nvls.cc): their slowdown is sm_count / (sm_count - those channels). Ring, tree
// and CollNet calls run on the communicator's channels, which dpsim does not derive (NCCL's graph search): they slow
// the compute by the measured average, data/nccl.yaml overlap_slowdown. A calibrated overlap_slowdown (dpsim
// calibrate, measured on the machine) replaces both.
#include <array>

#include "dpsim/collective_algorithm.hpp"
#include "dpsim/scenario.hpp"

namespace dpsim {

// Where a rank's compute runs: alone, beside a ring/tree/CollNet call, beside NVLS, beside NVLSTree.
constexpr int kOverlapLevels = 4;
int overlap_level(Algorithm a);

// The compute's slowdown at each level on a GPU of `gpu`'s SMs (1 alone).
std::array<double, kOverlapLevels> overlap_slowdowns(const NcclModel& nccl, const GpuSpec& gpu);

// parallelism.tp_comm_overlap: how a tensor-parallel collective runs beside the GEMM it feeds or drains: Transformer
// Engine's userbuffers (data/nccl.yaml tp_comm_overlap; transformer_engine/pytorch/module/base.py initialize_ub), or
// Megatron-Core's asynchronous NCCL call in a column-parallel linear's backward.
enum class TpOverlap {
  none,
  ring_exchange,  // an all-gather before its GEMM: tp chunks, each GEMM chunk beside the next chunk's exchange
  pipeline,       // a reduce-scatter after its GEMM: the GEMM in 4 chunks on the SMs the collective leaves it, each
                  // chunk's reduce-scatter beside the next chunk's GEMM
  bulk,           // a collective beside a GEMM it does not depend on (the saved input's all-gather beside the input
                  // gradient, the input gradient's reduce-scatter beside the weight gradient), on its own SMs
  async_nccl,     // an NCCL call on another stream beside a GEMM it does not depend on: the GEMM runs slowed by
                  // data/nccl.yaml overlap_slowdown while the call runs
};

// What the collective adds to the compute stream beside its GEMM: the pair's time overlapped, less the GEMM's own.
// `comm_s` is the collective alone, `gemm_s` the GEMM alone on all of the GPU's `sm_count` SMs, `tensor` the group.
double tp_overlap_exposed_s(TpOverlap method, double comm_s, double gemm_s, int tensor, int sm_count,
                            const NcclModel& nccl);

}  // namespace dpsim
