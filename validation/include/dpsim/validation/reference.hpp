#pragma once
// Scoring the simulator against the published reference set (validation/reference/*.yaml).
// All-reduce entries are predicted with core's allreduce_cost() (NCCL's alpha-beta model with the
// algorithm/protocol choice, the same function the simulator uses per bucket); DDP entries whose
// source states enough (model in models/, batch, precision, accumulation) are simulated with
// simulate() (or estimate() when asked). Every number compared is one read in the entry.
#include <filesystem>
#include <string>
#include <vector>

#include "dpsim/validation/compare.hpp"

namespace dpsim::validation {

struct ReferencePoint {
  std::string entry;  // reference id
  std::string file;   // reference file name
  std::string cls;    // nvswitch | nvlink_mesh | pcie | multinode
  std::string kind;   // allreduce_busbw_small (< 1 MiB) | allreduce_busbw_mid (1 MiB..256 MiB) | allreduce_busbw_large
                      // (>= 256 MiB) | allreduce_latency | allreduce_time | ddp_step_time | ddp_scaling
  std::string label;  // which number of the entry: "16GiB", "nvls 5gpu", "1M/8G", ...
  std::string topology;
  int nodes = 1;
  int gpus_per_node = 1;
  double bytes = 0;          // all-reduce message size (0 for DDP)
  std::string algorithm;     // requested: auto | ring | tree | nvls
  bool torch_timed = false;  // all-reduce timed through torch.distributed: includes PyTorch's launch of each call
  std::string nccl_release;  // the entry's software.nccl where it is a release: its tuning tables apply ("": none)
  bool single_thread_launch = false;  // nccl-tests -g N (scenario.launch: single_thread): N GPUs' launches per call
  double published = 0;               // the value read in the source (midpoint of a range)
  double published_low = 0;           // = published unless the source gives a range ("365-370")
  double published_high = 0;
  std::string unit;  // GB/s | s | x
  double predicted = 0;
  std::string predicted_by;  // "allreduce_cost nvls/simple", "simulate", "estimate"
  double rel_error = 0;
  std::string note;
};

struct SkippedEntry {
  std::string entry;
  std::string file;
  std::string reason;
};

// The memory dpsim predicts for a published run's configuration: the run ran, so it must fit (issue 15).
struct RunMemory {
  std::string entry;
  std::string file;
  std::string label;        // the first number predicted from this configuration (scenario and overrides)
  double needed_bytes = 0;  // per GPU, memory.needed_bytes_per_gpu
  double gpu_bytes = 0;     // memory.gpu_memory_bytes
  bool fits = false;
  bool published_oom = false;  // the source reports this configuration running out of GPU memory (memory_outcome)
  bool agrees() const { return fits != published_oom; }
};

struct ReferenceReport {
  std::vector<ReferencePoint> points;
  std::vector<SkippedEntry> skipped;  // unmapped or not predictable, with why
  std::vector<RunMemory> memory;      // one per configuration a DDP or end-to-end entry predicts, in order
  int entries = 0;
};

struct ReferenceOptions {
  bool simulate_ddp = true;  // false: DDP entries by estimate() (closed form) instead of simulate()
};

ReferenceReport score_reference(const std::filesystem::path& dir, const ReferenceOptions& options = {});

struct SummaryRow {
  std::string group;  // class or "all"
  std::string kind;
  ErrorStats stats;
};
// Per (class, kind), per kind over all classes.
std::vector<SummaryRow> summarize(const ReferenceReport& report);

// Targets (issue 5): all-reduce busbw >= 1 MiB median <= 5% and worst <= 15%; step time and scaling <= 8% median.
struct TargetCheck {
  std::string what;
  double value = 0;
  double target = 0;
  bool met = false;
  int points = 0;  // numbers scored; 0: the target is not judged (never met)
};
std::vector<TargetCheck> check_targets(const ReferenceReport& report);

std::string render_reference(const ReferenceReport& report);  // points, skipped, summary, targets
std::string reference_csv(const ReferenceReport& report);
// validation/reference-errors.md: targets, errors per class and kind, every number, what was skipped.
std::string reference_markdown(const ReferenceReport& report, const std::string& nccl_version);
std::string gnuplot_script(const ReferenceReport& report, const std::filesystem::path& data_file,
                           const std::filesystem::path& out);
// Write a log-log plot of predicted vs published with y = x and a +-10% band (PNG or SVG by extension) through gnuplot.
void plot_reference(const ReferenceReport& report, const std::filesystem::path& out);

// "1MiB" -> 1048576; "65K" -> 65536 (decimal labels are rounded to the nearest power of two, as
// nccl-tests sweeps by factors of 2); "16GB" -> 2^34. Returns 0 when the text is not a size.
double parse_size_label(const std::string& text);

}  // namespace dpsim::validation
