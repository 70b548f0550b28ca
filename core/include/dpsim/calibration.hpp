#pragma once
// Calibration: what was measured on a real machine (GEMM efficiency per shape, HBM and optimizer
// bandwidth, an all-reduce sweep, the overlap slowdown) and what `dpsim calibrate` fitted from it
// (per-fabric, per-protocol latency and bus bandwidth of t = a + S*2(n-1)/n / B). One YAML format,
// read and written here with yaml-cpp; docs/validation.md describes it.
//
// The fields up to `allreduce` are the ones dpsim::backend::Calibration has (the backend's
// `measure --calibrate` output reads here unchanged); `name` and `fits` are additions.
#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "dpsim/scenario.hpp"

namespace dpsim {

inline constexpr int kCalibrationFormatVersion = 1;

struct GemmCalibration {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  std::string dtype = "bf16";
  double seconds = 0;      // median of timed repetitions
  double flops_per_s = 0;  // 2 m n k batch / seconds
  double efficiency = 0;   // flops_per_s / peak_flops_per_s
};

// One all-reduce size as nccl-tests prints it (GB = 1e9 bytes); in-place figures 0 when absent.
struct AllreduceRow {
  double bytes = 0;
  double time_s = 0;
  double algbw_GBps = 0;
  double busbw_GBps = 0;
  double inplace_time_s = 0;
  double inplace_algbw_GBps = 0;
  double inplace_busbw_GBps = 0;
};

// A least-squares fit of t = latency_s + S * 2(n-1)/n / busbw over the sizes of one sweep.
struct CollectiveFit {
  std::string fabric = "nvswitch";  // nvswitch | pcie | nvlink_mesh | net | efa (the slowest hop of the ring)
  std::string algorithm = "ring";   // ring | tree | nvls: what NCCL ran (nccl-tests logs do not say; given by the user)
  std::string protocol = "simple";  // ll | ll128 | simple: the protocol NCCL runs at these sizes
  int world_size = 0;
  int nodes = 1;
  double latency_s = 0;             // a
  double busbw_bytes_per_s = 0;     // B
  double link_bytes_per_s = 0;      // nominal link bandwidth per direction (0: unknown)
  double bandwidth_efficiency = 0;  // B / link_bytes_per_s (0: unknown)
  double min_bytes = 0, max_bytes = 0;
  int points = 0;
  double rms_relative_residual = 0;  // of the fitted times
  double max_relative_residual = 0;
  double loo_relative_error = 0;  // leave-one-out: worst |t_pred - t| / t with that point left out of the fit
};

struct Calibration {
  int version = kCalibrationFormatVersion;
  std::string name;    // defaults to the file stem when read
  std::string source;  // "dpsim measure --calibrate" | "nccl-tests all_reduce_perf" | "dpsim calibrate"
  std::map<std::string, std::string> context;  // gpu, gpu_count, driver, cuda, nccl, host, date, ...
  double peak_flops_per_s = 0;
  double gemm_efficiency = 0;  // 0: not measured
  std::vector<GemmCalibration> gemm;
  double memory_bandwidth_bytes_per_s = 0;
  double memory_efficiency = 0;  // 0: not measured
  double optimizer_bytes_per_s = 0;
  double overlap_slowdown = 0;  // 0: not measured
  int allreduce_world_size = 0;
  std::vector<AllreduceRow> allreduce;
  std::vector<CollectiveFit> fits;  // what `dpsim calibrate` fitted
};

// Read and write the YAML format; errors are InputErrors with file, line and key path.
Calibration parse_calibration_yaml(const std::string& text, const std::string& file = "<calibration>");
Calibration read_calibration(const std::filesystem::path& file);
std::string calibration_to_yaml(const Calibration& calibration);                            // deterministic text
void write_calibration(const std::filesystem::path& file, const Calibration& calibration);  // atomic

// "fnv1a64:<16 hex>" of calibration_to_yaml(calibration): the identity predictions record.
std::string calibration_hash(const Calibration& calibration);
// {"name": ..., "hash": ..., "source": ...}: what a prediction's context block records.
nlohmann::json calibration_context(const Calibration& calibration);

// The fits apply_calibration applies, as (algorithm, protocol): the one list `dpsim calibrate --fit` accepts.
// A ring fit (any protocol) sets the ring's per-hop latency, a Simple one also the ring's bandwidth efficiency;
// an NVLS fit (Simple only, the one protocol NCCL runs NVLS with) sets NVLS's latency and algorithm bandwidth.
// No tree fit: the model's tree moves the ring's bytes at the ring's bandwidth (core/cost.cpp), so a tree's
// measured bandwidth has nothing to set.
struct FitKind {
  std::string_view algorithm;
  std::string_view protocol;
};
inline constexpr std::array<FitKind, 4> kAppliedFits{
    {{"ring", "simple"}, {"ring", "ll128"}, {"ring", "ll"}, {"nvls", "simple"}}};
bool fit_is_applied(std::string_view algorithm, std::string_view protocol);
// kAppliedFits as `--fit` spells them: "simple (= simple/ring), ll128, ll, simple/nvls".
std::string applied_fits_text();

// The busbw the fit's algorithm reaches at the nominal link bandwidth (0 when the link is unknown): the ring's
// busbw is at most the link's bandwidth; NVLS's algbw is, so its busbw at most link x 2(n-1)/n.
double fit_ceiling_bytes_per_s(const CollectiveFit& fit);

// Why predict cannot apply this fit on any scenario (a kind not in kAppliedFits, a bandwidth above
// fit_ceiling_bytes_per_s); nullopt when it can.
std::optional<std::string> fit_inapplicable(const CollectiveFit& fit);

// What apply_calibration did: each entry of the calibration, applied or not and why not.
struct CalibrationReport {
  struct NotApplied {
    std::string entry;
    std::string reason;
  };
  std::string name;
  std::string hash;
  std::vector<std::string> applied;
  std::vector<NotApplied> not_applied;
  // "calibration NAME: applied gemm_efficiency 0.71, simple/ring on nvswitch (8 ranks); not applied: ... (reason)"
  std::string summary() const;
  // calibration_context() plus "applied": [...] and "not_applied": [{"entry", "reason"}]
  nlohmann::json to_json(const Calibration& calibration) const;
};

// Override the scenario's constants with what the calibration measured or fitted (zeros are
// "not measured" and leave the scenario alone): the GPU's gemm_efficiency and memory_efficiency,
// nccl.overlap_slowdown, and per fit of the scenario's fabric nccl.ring_efficiency[fabric] (Simple)
// and the per-hop latency hw_latency[fabric][ring][protocol] that reproduces the fitted latency.
// The calibration's name and hash are recorded in scenario.nccl.version (which every result's
// context block carries as nccl_model_version): "2.30.7 + calibration NAME fnv1a64:...".
// Returns which entries were applied and which not (another fabric, another dtype, an inapplicable fit).
// A calibration whose context.gpu is not the scenario's GPU (as nvidia-smi names it) applies nothing: every entry
// is listed as not applied, "measured on X; this scenario runs Y".
CalibrationReport apply_calibration(Scenario& scenario, const Calibration& calibration);

// A YAML file as JSON (plain scalars that read as numbers or booleans become numbers or booleans;
// quoted scalars stay strings). For readers outside core, where yaml-cpp is not used: the published
// reference set (validation/reference/*.yaml). Errors name the file and line. `lines`, when given, maps the JSON
// pointer of every node ("/3/scenario/predict") to its 1-based line, so a reader can name the line of a bad value.
using YamlLines = std::map<std::string, int>;
nlohmann::json read_yaml_as_json(const std::filesystem::path& file, YamlLines* lines = nullptr);

}  // namespace dpsim
