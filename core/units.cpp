#include "dpsim/units.hpp"

#include <charconv>
#include <cmath>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace dpsim {

namespace {

using Table = std::vector<std::pair<std::string_view, double>>;

// Bytes: decimal (KB = 1e3) and binary (KiB = 1024) prefixes.
const Table kBytes = {{"B", 1.0},         {"KB", 1e3},           {"MB", 1e6},
                      {"GB", 1e9},        {"TB", 1e12},          {"KiB", 1024.0},
                      {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
// Bandwidth: B = bytes per second, b = bits per second; "GBps" and "GB/s" spell the same unit.
const Table kBandwidth = {{"Bps", 1.0},        {"KBps", 1e3},     {"MBps", 1e6},
                          {"GBps", 1e9},       {"TBps", 1e12},    {"B/s", 1.0},
                          {"KB/s", 1e3},       {"MB/s", 1e6},     {"GB/s", 1e9},
                          {"TB/s", 1e12},      {"bps", 0.125},    {"Kbps", 125.0},
                          {"Mbps", 1.25e5},    {"Gbps", 1.25e8},  {"Tbps", 1.25e11},
                          {"b/s", 0.125},      {"Kb/s", 125.0},   {"Mb/s", 1.25e5},
                          {"Gb/s", 1.25e8},    {"Tb/s", 1.25e11}, {"GiBps", 1073741824.0},
                          {"MiBps", 1048576.0}};
const Table kTime = {{"s", 1.0}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}};
const Table kFlops = {{"FLOPS", 1.0},   {"KFLOPS", 1e3}, {"MFLOPS", 1e6}, {"GFLOPS", 1e9}, {"TFLOPS", 1e12},
                      {"PFLOPS", 1e15}, {"Tf", 1e12},    {"Gf", 1e9},     {"Pf", 1e15}};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string expected_units(const Table& table) {
  std::string out;
  for (const auto& [name, factor] : table) {
    (void)factor;
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

double parse_with(std::string_view text, const Table& table, const char* what) {
  const std::string_view s = trim(text);
  double value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec == std::errc::result_out_of_range)
    throw std::invalid_argument(fmt::format("\"{}\" is out of range", std::string(text)));
  if (ec != std::errc() || end == s.data()) {
    throw std::invalid_argument(fmt::format("cannot parse \"{}\" as {} (expected a number and a unit: {})",
                                            std::string(text), what, expected_units(table)));
  }
  if (!std::isfinite(value))
    throw std::invalid_argument(fmt::format("\"{}\" is not a finite number", std::string(text)));
  const std::string_view unit = trim(std::string_view(end, static_cast<size_t>(s.data() + s.size() - end)));
  for (const auto& [name, factor] : table) {
    if (unit != name) continue;
    const double scaled = value * factor;  // 1e300 TB is finite as a number but not in bytes
    if (!std::isfinite(scaled)) throw std::invalid_argument(fmt::format("\"{}\" is out of range", std::string(text)));
    return scaled;
  }
  throw std::invalid_argument(fmt::format("cannot parse \"{}\" as {}: unknown unit \"{}\" (expected one of {})",
                                          std::string(text), what, std::string(unit), expected_units(table)));
}

}  // namespace

double parse_bytes(std::string_view text) { return parse_with(text, kBytes, "a size"); }
double parse_bandwidth_bytes_per_s(std::string_view text) { return parse_with(text, kBandwidth, "a bandwidth"); }
double parse_seconds(std::string_view text) { return parse_with(text, kTime, "a time"); }
double parse_flops_per_s(std::string_view text) { return parse_with(text, kFlops, "a compute rate"); }

std::string format_bytes(double bytes) {
  if (bytes >= 1e12) return fmt::format("{:.2f} TB", bytes / 1e12);
  if (bytes >= 1e9) return fmt::format("{:.2f} GB", bytes / 1e9);
  if (bytes >= 1e6) return fmt::format("{:.2f} MB", bytes / 1e6);
  if (bytes >= 1e3) return fmt::format("{:.2f} kB", bytes / 1e3);
  return fmt::format("{:.0f} B", bytes);
}

std::string format_size_label(double bytes) {
  const double l = std::log2(bytes);
  if (bytes >= 1 && l == std::floor(l)) {
    const int e = static_cast<int>(l);
    if (e >= 30) return fmt::format("{}GiB", 1ll << (e - 30));
    if (e >= 20) return fmt::format("{}MiB", 1ll << (e - 20));
    if (e >= 10) return fmt::format("{}KiB", 1ll << (e - 10));
    return fmt::format("{}B", 1ll << e);
  }
  return fmt::format("{:.0f}B", bytes);
}

std::string format_bandwidth(double bytes_per_s) { return fmt::format("{:.1f} GB/s", bytes_per_s / 1e9); }

std::string format_seconds(double seconds) {
  if (seconds >= 1.0) return fmt::format("{:.3f} s", seconds);
  if (seconds >= 1e-3) return fmt::format("{:.2f} ms", seconds * 1e3);
  return fmt::format("{:.1f} us", seconds * 1e6);
}

std::string format_count(double count) {
  std::string digits = fmt::format("{:.0f}", count);
  std::string out;
  const size_t start = (!digits.empty() && digits[0] == '-') ? 1 : 0;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > start && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace dpsim
