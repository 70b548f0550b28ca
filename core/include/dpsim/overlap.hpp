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

}  // namespace dpsim
