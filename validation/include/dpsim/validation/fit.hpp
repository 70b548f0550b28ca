#pragma once
// `dpsim calibrate`: fit the collective model and the compute constants from measured data.
// All-reduce: t = a + x / B with x = S * 2(n-1)/n (the bytes each rank sends), least squares on
// relative residuals (weights 1/t^2), so a 16 GiB row does not drown the 1 MiB ones.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dpsim/calibration.hpp"
#include "dpsim/result.hpp"
#include "dpsim/scenario.hpp"

namespace dpsim::validation {

inline constexpr int kMinFitSizes = 3;  // fewer distinct sizes: refuse

// A fit `dpsim calibrate` writes must describe its sweep (docs/validation.md, "Calibrating"): above either limit
// it refuses (--force writes it anyway, with a warning). From the published logs in tests/validation/data, over
// one protocol's sizes (256 MiB and up) the fits give rms 0.2-3.9% and leave-one-out 0.6-25% (the 25%: the A100
// log's 3 noisy sizes); over ranges that mix protocols or algorithms rms 11-64% and leave-one-out 34% to 39x
// (the GB10 pair's 4 sizes 11% / 34%, the 2-node H100 log's every size 30% / 74%, the H100 node's every size 64%).
inline constexpr double kMaxRmsRelativeResidual = 0.10;
inline constexpr double kMaxLooRelativeError = 0.30;

struct FitRange {
  std::string protocol = "simple";  // ll | ll128 | simple
  std::string algorithm = "ring";   // ring | tree | nvls
  double min_bytes = 0;
  double max_bytes = 1e300;
};

struct FitTarget {
  std::string fabric = "nvswitch";  // nvswitch | pcie | nvlink_mesh | net
  int nodes = 1;
  double link_bytes_per_s = 0;  // nominal per direction, for bandwidth_efficiency (0: unknown)
  // The model's pipeline fills (data/nccl.yaml). On one node the model adds them to latency + S/B, so the fit
  // takes them off the measured times first: a calibrated latency and bandwidth then reproduce the sweep with
  // the fill, not twice it. Across nodes the ring's fill hides behind the network and is not taken off.
  PipelineFill ring_fill;
  PipelineFill nvls_fill;
  bool nvls = false;     // the model runs NVLS on this topology (one NVSwitch node, enough GPUs)
  std::string topology;  // its name, for messages ("" without --topology)
};

struct LineFit {
  double a = 0;  // intercept: latency (s)
  double c = 0;  // slope: 1 / B (s per byte)
};
// Weighted least squares of t = a + c x minimising sum ((a + c x - t) / t)^2. Needs 2 distinct x.
LineFit fit_line(const std::vector<double>& x, const std::vector<double>& t);

// Fit one range of one sweep; throws InputError ("too little data ...") with fewer than kMinFitSizes sizes.
CollectiveFit fit_allreduce(const std::vector<AllreduceRow>& rows, int world_size, const FitRange& range,
                            const FitTarget& target);

// What `dpsim calibrate` reads: calibration YAML (dpsim measure --calibrate or calibrate output),
// nccl-tests all_reduce_perf logs, measured step JSON (needs the scenario).
Calibration read_calibration_input(const std::filesystem::path& file);

// GEMM efficiency and overlap slowdown from a measured step: forward runs alone, so
// efficiency = forward FLOPs / (peak x forward_s); backward runs beside the all-reduces, so
// overlap_slowdown = backward_s / (backward FLOPs / (peak x efficiency)).
struct StepFit {
  double gemm_efficiency = 0;
  double overlap_slowdown = 0;
};
StepFit fit_step(const Scenario& scenario, const StepResult& measured);

struct CalibrateOptions {
  std::vector<FitRange> ranges;     // empty: one Simple/ring fit over every size
  std::optional<FitTarget> target;  // from --topology; else fabric given or "nvswitch"
  std::string name;
  std::string inputs;  // the input files, for messages
  bool force = false;  // write a fit above the residual limits (with a warning)
};

// Why `dpsim calibrate` must not write this fit, with the fix. `forceable`: only the residual limits are exceeded.
struct FitProblem {
  std::string reason;
  bool forceable = false;
};
// A kind predict does not apply, a busbw above what the fit's algorithm reaches at nominal bandwidth (the model's
// ceiling; the message quotes the busbw `rows` show at the fit's largest size), or residuals above
// kMaxRmsRelativeResidual / kMaxLooRelativeError.
std::optional<FitProblem> check_fit(const CollectiveFit& fit, const FitTarget& target,
                                    const std::vector<AllreduceRow>& rows = {});

// Merge inputs, fit every range of every sweep, and return the calibration with its fits. A fit check_fit refuses
// throws InputError naming options.inputs and the reason; with options.force a forceable one is kept and its
// warning appended to `warnings` (when given).
Calibration calibrate(const std::vector<Calibration>& inputs, const std::vector<StepFit>& steps,
                      const CalibrateOptions& options, std::vector<std::string>* warnings = nullptr);

// "fit: simple ring on nvswitch, 8 ranks, 12 sizes 1 MiB..16 GiB: a = 23.1 us, B = 371.2 GB/s (82.5% of 450 GB/s);
//  residuals rms 1.2% max 3.4%; leave-one-out 4.1%"
std::string describe_fit(const CollectiveFit& fit);

// The fabric and nominal link bandwidth NCCL's ring sees on a topology (as the cost model uses them), and
// the model's pipeline fills from `nccl`.
FitTarget fit_target(const Topology& topology, const NcclModel& nccl);

}  // namespace dpsim::validation
