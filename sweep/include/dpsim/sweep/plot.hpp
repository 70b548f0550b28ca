#pragma once
// Pictures of sweep results (DIR/results.csv) drawn by gnuplot, as PNG and SVG:
//   scaling   — throughput and scaling efficiency vs GPU count, one line per cluster design
//   breakdown — stacked step breakdown (forward, backward, exposed communication, optimizer) per point
//   buckets   — step time and exposed communication vs DDP bucket cap (needs a ddp.bucket_cap axis)
//   cost      — cost per million tokens per point; non-fitting points marked (needs cluster.price_per_gpu_hour)
#include <filesystem>
#include <string>
#include <vector>

namespace dpsim {

// Draws `kinds` ("scaling", "breakdown", "buckets", "cost"; empty = every kind the columns allow) into
// out_dir; returns the files written. Throws RuntimeError when gnuplot fails or is missing.
std::vector<std::filesystem::path> plot_sweep(const std::filesystem::path& results_csv,
                                              const std::filesystem::path& out_dir,
                                              const std::vector<std::string>& kinds);

}  // namespace dpsim
