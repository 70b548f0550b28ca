#pragma once
// The --help line of each subcommand that runs in dpsim-sim (app/helper.hpp): its own register function and
// dpsim's forwarder (app/commands_lean.cpp) show the same line.
namespace dpsim::app {

inline constexpr const char* kPredictSummary = "Simulate one training step on SimGrid (no GPU needed)";
inline constexpr const char* kValidateSummary =
    "Compare a prediction with a measurement (phases, buckets; exit 1 outside tolerance), or score the published "
    "reference set";
inline constexpr const char* kCalibrateSummary =
    "Fit latency and bandwidth efficiency per fabric and protocol, GEMM efficiency and overlap slowdown from "
    "measurements -> calibration YAML";
inline constexpr const char* kSweepSummary =
    "Run a grid of scenario variants in parallel; results as CSV and JSON lines";
inline constexpr const char* kPlotSummary = "Draw PNG and SVG plots of a sweep's results.csv with gnuplot";

}  // namespace dpsim::app
