#include "dpsim/overlap.hpp"

#include <algorithm>

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

double tp_overlap_exposed_s(TpOverlap method, double comm_s, double gemm_s, int tensor, int sm_count,
                            const NcclModel& nccl) {
  if (method == TpOverlap::none) return comm_s;
  if (method == TpOverlap::async_nccl) {
    // While the call runs the GEMM advances at 1/slowdown; it ends with the call or with the GEMM's rest after it.
    const double slowdown = std::max(1.0, nccl.overlap_slowdown);
    return comm_s < gemm_s * slowdown ? comm_s * (1.0 - 1.0 / slowdown) : comm_s - gemm_s;
  }
  // The GEMM on the SMs the collective leaves it ("num_sm" 16 and "set_sm_margin" for pipeline and bulk; the ring
  // exchange runs on copy engines and one SM: none taken).
  const int taken = method == TpOverlap::ring_exchange ? 0 : nccl.tp_overlap_comm_sms;
  const double slowed = sm_count > taken && taken > 0 ? gemm_s * sm_count / (sm_count - taken) : gemm_s;
  double overlapped = 0;
  switch (method) {
    case TpOverlap::ring_exchange: {
      // tp chunks: the first is local, each later one arrives while the GEMM runs on the one before
      const int n = std::max(1, tensor);
      const double gemm_chunk = slowed / n, comm_chunk = n > 1 ? comm_s / (n - 1) : 0.0;
      overlapped = gemm_chunk + (n - 1) * std::max(gemm_chunk, comm_chunk);
      break;
    }
    case TpOverlap::pipeline: {
      // the GEMM in `splits` chunks, each chunk's reduce-scatter beside the next chunk's GEMM; the last one's alone
      const int n = std::max(1, nccl.tp_overlap_pipeline_splits);
      const double gemm_chunk = slowed / n, comm_chunk = comm_s / n;
      overlapped = gemm_chunk + (n - 1) * std::max(gemm_chunk, comm_chunk) + comm_chunk;
      break;
    }
    case TpOverlap::bulk: overlapped = std::max(slowed, comm_s); break;
    case TpOverlap::none:
    case TpOverlap::async_nccl: break;
  }
  return std::max(0.0, overlapped - gemm_s);
}

}  // namespace dpsim
