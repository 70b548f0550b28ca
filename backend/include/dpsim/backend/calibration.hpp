#pragma once
// Calibration data: what `dpsim measure --calibrate` measures (GEMM efficiency per shape, HBM copy
// and optimizer bandwidth, an all-reduce sweep) and nccl-tests' own all_reduce_perf logs, in one
// YAML format that `dpsim predict --calibration FILE` reads. Format: docs/backend.md.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace dpsim::backend {

inline constexpr int kCalibrationVersion = 1;

struct GemmCalibration {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  std::string dtype = "bf16";
  double seconds = 0;      // median of timed repetitions
  double flops_per_s = 0;  // 2 m n k batch / seconds
  double efficiency = 0;   // flops_per_s / peak_flops_per_s
};

// One all-reduce size, as nccl-tests prints it (GB = 1e9 bytes). Out-of-place figures; in-place
// ones when the source has them (0 otherwise).
struct AllreduceRow {
  double bytes = 0;
  double time_s = 0;
  double algbw_GBps = 0;
  double busbw_GBps = 0;
  double inplace_time_s = 0;
  double inplace_algbw_GBps = 0;
  double inplace_busbw_GBps = 0;
};

struct Calibration {
  int version = kCalibrationVersion;
  std::string source;                          // "dpsim measure --calibrate" | "nccl-tests all_reduce_perf"
  std::map<std::string, std::string> context;  // gpu, gpu_count, driver, cuda, nccl, cublas, host, git, date
  double peak_flops_per_s = 0;                 // catalog peak the GEMM efficiencies are relative to
  double gemm_efficiency = 0;                  // FLOP-weighted over `gemm` (0: not measured)
  std::vector<GemmCalibration> gemm;
  double memory_bandwidth_bytes_per_s = 0;  // device-to-device copy, bytes read + written
  double memory_efficiency = 0;             // of the catalog's HBM bandwidth
  double optimizer_bytes_per_s = 0;         // fused AdamW traffic / time
  double overlap_slowdown = 0;              // GEMM time with an all-reduce beside it / alone (0: not measured)
  int allreduce_world_size = 0;
  std::vector<AllreduceRow> allreduce;
};

// nccl-tests all_reduce_perf output (any version since 2.0: with or without the root column, with
// "#wrong" or "error", mpirun "[1,0]<stdout>:" prefixes). World size from its "#  Rank" lines,
// GPU name and host into context. Throws InputError when no data row is found.
Calibration parse_nccl_tests_log(const std::string& text, const std::string& file = "<log>");

// busbw of an all-reduce as nccl-tests defines it: algbw * 2(n-1)/n.
double allreduce_busbw_GBps(double bytes, double seconds, int world_size);

// One printed row like nccl-tests' (size, count, type, redop, root, time us, algbw, busbw, #wrong).
std::string nccl_tests_header();
std::string nccl_tests_row(const AllreduceRow& row, int element_bytes, const char* type_name);

std::string calibration_to_yaml(const Calibration& calibration);
// Reads the format calibration_to_yaml writes (a small, documented YAML subset: top-level
// scalars, the `context` map, and lists of one-line flow maps under `gemm` and `allreduce.rows`).
Calibration parse_calibration_yaml(const std::string& text, const std::string& file = "<calibration>");
Calibration read_calibration(const std::filesystem::path& file);  // .yaml, or a raw nccl-tests log
void write_calibration(const std::filesystem::path& file, const Calibration& calibration);  // atomic

}  // namespace dpsim::backend
