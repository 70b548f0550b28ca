#pragma once
// The cost plot of a sweep (sweep/src/plot_cost.cpp): predicted cost per million tokens per point, as bars; points
// whose configuration does not fit in GPU memory get a marker and a label instead of a bar.
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace dpsim {

using PlotRow = std::map<std::string, std::string>;  // CSV column -> cell
// Renders a gnuplot body (everything after "set terminal/output") as out_dir/name.{png,svg}; returns the files.
using PlotRender = std::function<std::vector<std::filesystem::path>(const std::filesystem::path& out_dir,
                                                                    const std::string& name, const std::string& body)>;

// True when some row has a cost_per_million_tokens figure (the sweep set cluster.price_per_gpu_hour).
bool has_cost_columns(const std::vector<PlotRow>& rows);

std::vector<std::filesystem::path> cost_plot(const std::vector<PlotRow>& rows, const std::vector<std::string>& axes,
                                             const std::filesystem::path& out_dir, const PlotRender& render);

}  // namespace dpsim
