// The compute beside a collective: NCCL's kernel holds an SM per channel; NVLS's channels are NCCL's own count.
#include <catch2/catch.hpp>

#include <filesystem>

#include "../source_dir.hpp"
#include "dpsim/load.hpp"
#include "dpsim/overlap.hpp"

using namespace dpsim;

namespace {
NcclModel shipped_nccl() { return load_nccl(std::filesystem::path(DPSIM_SOURCE_DIR) / "data" / "nccl.yaml"); }
}  // namespace

TEST_CASE("NVLS slows the compute beside it by the SMs its channels hold; rings by the measured average") {
  const NcclModel nccl = shipped_nccl();
  const double ring = nccl.overlap_slowdown;  // data/nccl.yaml: the measured average
  CHECK(ring > 1.0);
  // H100: 132 SMs, 16 NVLS channels on one node and across nodes (transport/nvls.cc NVLS_NCHANNELS_SM90)
  const auto h100 = overlap_slowdowns(nccl, load_gpu("H100-SXM"));
  CHECK(h100[0] == 1.0);
  CHECK(h100[overlap_level(Algorithm::ring)] == ring);
  CHECK(h100[overlap_level(Algorithm::tree)] == ring);
  CHECK(h100[overlap_level(Algorithm::collnet_chain)] == ring);
  CHECK(h100[overlap_level(Algorithm::nvls)] == Approx(132.0 / 116));
  CHECK(h100[overlap_level(Algorithm::nvlstree)] == Approx(132.0 / 116));
  CHECK(h100[overlap_level(Algorithm::nvls)] < ring);  // "NVLS uses about 16 SMs, a ring more"
  // B200: 148 SMs, 24 NVLS channels on one node, 32 across nodes (the sm100 counts)
  const auto b200 = overlap_slowdowns(nccl, load_gpu("B200"));
  CHECK(b200[overlap_level(Algorithm::nvls)] == Approx(148.0 / 124));
  CHECK(b200[overlap_level(Algorithm::nvlstree)] == Approx(148.0 / 116));
  // A GPU whose SMs are not known keeps the measured average; so does every algorithm under a calibration
  GpuSpec unknown = load_gpu("H100-SXM");
  unknown.sm_count = 0;
  CHECK(overlap_slowdowns(nccl, unknown)[overlap_level(Algorithm::nvls)] == ring);
  NcclModel calibrated = nccl;
  calibrated.set_overlap_slowdown_everywhere(1.07);
  for (double s :
       {overlap_slowdowns(calibrated, load_gpu("H100-SXM"))[1], overlap_slowdowns(calibrated, load_gpu("H100-SXM"))[2],
        overlap_slowdowns(calibrated, load_gpu("B200"))[3]})
    CHECK(s == 1.07);
}
