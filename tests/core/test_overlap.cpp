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

TEST_CASE("tp_comm_overlap: what Transformer Engine's userbuffers leave exposed beside each GEMM (base.py defaults)") {
  const NcclModel nccl = shipped_nccl();
  REQUIRE(nccl.tp_overlap_pipeline_splits == 4);
  REQUIRE(nccl.tp_overlap_comm_sms == 16);
  const int sms = 132, t = 4;
  // Without overlap the call blocks for all of itself.
  CHECK(tp_overlap_exposed_s(TpOverlap::none, 3.0, 10.0, t, sms, nccl) == 3.0);
  // Ring exchange (an all-gather before its GEMM, copy engines, no SMs taken): t chunks, the first local; a GEMM
  // longer than the exchange hides it all, a shorter one hides all but what its last chunk cannot cover.
  CHECK(tp_overlap_exposed_s(TpOverlap::ring_exchange, 3.0, 8.0, t, sms, nccl) == Approx(0.0));
  CHECK(tp_overlap_exposed_s(TpOverlap::ring_exchange, 6.0, 4.0, t, sms, nccl) == Approx(1.0 + 3 * 2.0 - 4.0));
  // Pipeline (a reduce-scatter after its GEMM): the GEMM in 4 chunks on 132 - 16 SMs, each chunk's reduce-scatter
  // beside the next chunk's GEMM, the last one's alone.
  const double slowed = 8.0 * 132 / 116;
  CHECK(tp_overlap_exposed_s(TpOverlap::pipeline, 2.0, 8.0, t, sms, nccl) == Approx(slowed + 2.0 / 4 - 8.0));
  CHECK(tp_overlap_exposed_s(TpOverlap::pipeline, 20.0, 8.0, t, sms, nccl) == Approx(slowed / 4 + 3 * 5.0 + 5.0 - 8.0));
  // Bulk (the input gradient's reduce-scatter beside the weight-gradient GEMM, 16 SMs): the longer of the two.
  CHECK(tp_overlap_exposed_s(TpOverlap::bulk, 2.0, 8.0, t, sms, nccl) == Approx(slowed - 8.0));
  CHECK(tp_overlap_exposed_s(TpOverlap::bulk, 12.0, 8.0, t, sms, nccl) == Approx(12.0 - 8.0));
  // Overlapped, a call never blocks longer than alone plus the SMs it takes from the GEMM.
  for (double comm : {0.5, 2.0, 8.0, 30.0})
    for (TpOverlap m : {TpOverlap::ring_exchange, TpOverlap::pipeline, TpOverlap::bulk})
      CHECK(tp_overlap_exposed_s(m, comm, 8.0, t, sms, nccl) <= comm + slowed - 8.0 + 1e-12);
}

TEST_CASE("tp_comm_overlap backward: an asynchronous NCCL call slows the GEMM beside it while it runs") {
  const NcclModel nccl = shipped_nccl();
  const double s = nccl.overlap_slowdown;  // data/nccl.yaml: the measured average
  REQUIRE(s > 1.0);
  const int sms = 132, t = 8;
  // A call shorter than the slowed GEMM: the GEMM loses comm x (1 - 1/s) of its progress, nothing else shows.
  CHECK(tp_overlap_exposed_s(TpOverlap::async_nccl, 2.0, 8.0, t, sms, nccl) == Approx(2.0 * (1 - 1 / s)));
  // A call longer than that: the GEMM is hidden under it and the call's excess shows.
  CHECK(tp_overlap_exposed_s(TpOverlap::async_nccl, 20.0, 8.0, t, sms, nccl) == Approx(12.0));
  // The two meet where the call lasts as long as the slowed GEMM, and never exceed the call alone.
  CHECK(tp_overlap_exposed_s(TpOverlap::async_nccl, 8.0 * s, 8.0, t, sms, nccl) == Approx(8.0 * s - 8.0));
  for (double comm : {0.5, 2.0, 8.0, 30.0}) {
    const double exposed = tp_overlap_exposed_s(TpOverlap::async_nccl, comm, 8.0, t, sms, nccl);
    CHECK(exposed < comm);
    CHECK(exposed > 0.0);
  }
  // Without a slowdown a call under its GEMM is free.
  NcclModel free = nccl;
  free.overlap_slowdown = 1.0;
  CHECK(tp_overlap_exposed_s(TpOverlap::async_nccl, 2.0, 8.0, t, sms, free) == 0.0);
}
