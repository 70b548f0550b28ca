#include "dpsim/overlap.hpp"

namespace dpsim {

void NcclModel::set_overlap_slowdown_everywhere(double slowdown) {
  overlap_slowdown = slowdown;
  overlap_slowdown_calibrated = true;
}

int overlap_level(Algorithm a) {
  switch (a) {
    case Algorithm::nvls: return 2;
    case Algorithm::nvlstree: return 3;
    default: return 1;
  }
}

std::array<double, kOverlapLevels> overlap_slowdowns(const NcclModel& nccl, const GpuSpec& gpu) {
  const double ring = nccl.overlap_slowdown > 0 ? nccl.overlap_slowdown : 1.0;
  if (nccl.overlap_slowdown_calibrated) return {1.0, ring, ring, ring};
  // NVLS on one node, NVLSTree across nodes: the NVLS channels of each (one CTA each)
  const auto beside_nvls = [&](bool several_nodes) {
    const int ctas = nccl.step_chunks.nvls_channels_for(gpu.arch, several_nodes);
    if (gpu.sm_count <= 0 || ctas <= 1 || ctas >= gpu.sm_count) return ring;  // no channel count or SM count to use
    return static_cast<double>(gpu.sm_count) / (gpu.sm_count - ctas);
  };
  return {1.0, ring, beside_nvls(false), beside_nvls(true)};
}

}  // namespace dpsim
