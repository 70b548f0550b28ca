// dpsim inspect gpus: the GPU catalog (data/gpus/*.yaml) as dpsim reads it: keys for cluster.gpu, memory, dense peaks,
// memory bandwidth, and where each figure comes from.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "dpsim/load.hpp"
#include "dpsim/units.hpp"
#include "report.hpp"
#include "tables.hpp"

namespace dpsim::app {

namespace {

std::string tflops(double flops_per_s) { return flops_per_s > 0 ? fmt::format("{:.1f}", flops_per_s / 1e12) : "-"; }

nlohmann::json optional_rate(double flops_per_s) {
  return flops_per_s > 0 ? nlohmann::json(flops_per_s) : nlohmann::json(nullptr);
}

nlohmann::json to_json(const std::vector<GpuSpec>& gpus) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& g : gpus) {
    list.push_back({{"key", g.key},
                    {"name", g.name},
                    {"arch", to_string(g.arch)},
                    {"memory_bytes", g.memory_bytes},
                    {"memory_as_written", g.memory_as_written},
                    {"peak_bf16_flops_per_s", optional_rate(g.peak_bf16_flops_per_s)},
                    {"peak_fp16_flops_per_s", g.peak_fp16_flops_per_s},
                    {"peak_tf32_flops_per_s", optional_rate(g.peak_tf32_flops_per_s)},
                    {"peak_fp8_flops_per_s", optional_rate(g.peak_fp8_flops_per_s)},
                    {"peak_fp32_flops_per_s", g.peak_fp32_flops_per_s},
                    {"memory_bandwidth_bytes_per_s", g.memory_bandwidth_bytes_per_s},
                    {"gemm_efficiency", g.gemm_efficiency},
                    {"memory_efficiency", g.memory_efficiency},
                    {"source", g.source}});
  }
  return {{"file", gpu_catalog_dir().string()}, {"gpus", list}};
}

// The 16-bit GEMM rate the compute model starts from: the bf16 peak (fp16 where the GPU has no bf16) x
// gemm_efficiency, the best-shape (MAMF) share, as "792.1 (0.80)".
std::string best_gemm(const GpuSpec& g) {
  const double peak = g.peak_flops_per_s(g.peak_bf16_flops_per_s > 0 ? Dtype::bf16 : Dtype::fp16);
  return fmt::format("{} ({:.2f})", tflops(peak * g.gemm_efficiency), g.gemm_efficiency);
}

std::string to_text(const std::vector<GpuSpec>& gpus) {
  std::vector<std::vector<std::string>> rows{{"key (cluster.gpu)", "name", "arch", "memory", "bf16", "fp16", "tf32",
                                              "fp32", "fp8", "best GEMM", "memory bandwidth"}};
  for (const auto& g : gpus) {
    rows.push_back({g.key, g.name, to_string(g.arch), gpu_memory_label(g), tflops(g.peak_bf16_flops_per_s),
                    tflops(g.peak_fp16_flops_per_s), tflops(g.peak_tf32_flops_per_s), tflops(g.peak_fp32_flops_per_s),
                    tflops(g.peak_fp8_flops_per_s), best_gemm(g), format_bandwidth(g.memory_bandwidth_bytes_per_s)});
  }
  std::string out = fmt::format(
      "GPUs in {} (peaks in TFLOPS, dense: no 2:4 sparsity; '-': no such unit; GB = 1e9 bytes; best GEMM: the 16-bit "
      "peak x gemm_efficiency, the rate of large well-shaped GEMMs before tile and wave quantization)\n",
      gpu_catalog_dir().string());
  out += render_table(rows) + "Sources:\n";
  for (const auto& g : gpus) out += fmt::format("  {}: {}\n", g.key, g.source.empty() ? "(none given)" : g.source);
  return out;
}

}  // namespace

void register_inspect_gpus(CLI::App& inspect) {
  auto json_out = std::make_shared<bool>(false);
  auto* cmd = inspect.add_subcommand("gpus", "The GPU catalog: keys for cluster.gpu, memory, peak rates, sources");
  cmd->add_flag("--json", *json_out,
                "Print JSON: {file, gpus: [{key, name, arch, memory_bytes, memory_as_written, peak_*_flops_per_s (fp8: "
                "null where the catalog gives no FP8 rate), "
                "memory_bandwidth_bytes_per_s, gemm_efficiency, memory_efficiency, source}]}");
  cmd->callback([json_out] {
    const auto gpus = load_gpu_catalog();
    emit(*json_out ? to_json(gpus).dump(2) + "\n" : to_text(gpus), "");
  });
}

}  // namespace dpsim::app
