// nccl-tests log parser and row printer, beside core's calibration format (core/calibration.cpp).
#include "dpsim/nccl_tests_log.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "dpsim/error.hpp"
#include "dpsim/result.hpp"

namespace dpsim {

namespace {

std::vector<std::string> split_ws(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

bool is_integer(const std::string& s) {
  if (s.empty()) return false;
  size_t i = s[0] == '-' ? 1 : 0;
  if (i == s.size()) return false;
  return std::all_of(s.begin() + static_cast<long>(i), s.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

bool to_double(const std::string& s, double& out) {
  try {
    size_t used = 0;
    out = std::stod(s, &used);
    return used == s.size();
  } catch (...) {
    return false;
  }
}

// nccl-tests' "nccl-library=N" (NCCL_VERSION_CODE, major x 10000 + minor x 100 + patch since 2.9): a number of at
// most six digits, else the line is damaged.
int version_code(const std::string& digits, const std::string& file, int line) {
  int v = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || end != digits.data() + digits.size() || v > 999999)
    throw InputError(file, line, "nccl-library",
                     fmt::format("\"{}\" is not an NCCL version code (major x 10000 + minor x 100 + patch)", digits));
  return v;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// mpirun --tag-output prefixes: "[1,0]<stdout>:", and "[0] " from some launchers.
std::string strip_prefix(std::string line) {
  static const std::regex tag(R"(^\s*\[\d+(,\d+)?\](<stdout>|<stderr>)?:?\s?)");
  const auto first = line.find_first_not_of(" \t");
  if (first == std::string::npos || line[first] != '[') return line;  // the regex only where it can match
  return std::regex_replace(line, tag, "");
}

// Bytes per element of an nccl-tests data type (0: not a type nccl-tests names; then not checked).
int element_bytes(const std::string& type) {
  static const std::map<std::string, int> bytes{{"int8", 1},   {"uint8", 1},    {"int32", 4},    {"uint32", 4},
                                                {"int64", 8},  {"uint64", 8},   {"half", 2},     {"float", 4},
                                                {"double", 8}, {"bfloat16", 2}, {"fp8_e4m3", 1}, {"fp8_e5m2", 1}};
  const auto it = bytes.find(type);
  return it == bytes.end() ? 0 : it->second;
}

}  // namespace

double allreduce_busbw_GBps(double bytes, double seconds, int world_size) {
  if (seconds <= 0 || world_size <= 0) return 0;
  return bytes / seconds / 1e9 * 2.0 * (world_size - 1) / world_size;
}

Calibration parse_nccl_tests_log(const std::string& text, const std::string& file) {
  Calibration cal;
  cal.source = "nccl-tests all_reduce_perf";
  std::istringstream in(text);
  std::set<std::string> ranks;
  std::string gpu, host;
  int line_no = 0;
  static const std::regex rank_re(
      R"(^#?\s*Rank\s+(\d+)\s+(Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s+(.*)$)");
  static const std::regex version_re(R"(nccl-tests version (\S+).*nccl-library=(\d+))");
  std::smatch m;
  for (std::string raw; std::getline(in, raw);) {
    ++line_no;
    const std::string line = trim(strip_prefix(raw));
    if (line.empty()) continue;
    if (line.find("Rank") != std::string::npos && std::regex_search(line, m, rank_re)) {
      ranks.insert(m[1].str() + "@" + m[3].str());
      host = m[3].str();
      gpu = trim(m[4].str());
      continue;
    }
    if (line.find("nccl-tests version") != std::string::npos && std::regex_search(line, m, version_re)) {
      cal.context["nccl_tests"] = m[1].str();
      const int v = version_code(m[2].str(), file, line_no);  // NCCL_VERSION_CODE: major*10000 + minor*100 + patch
      cal.context["nccl"] = fmt::format("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
      continue;
    }
    if (line[0] == '#') continue;
    const auto t = split_ws(line);
    // size count type redop [root] time algbw busbw wrong [time algbw busbw wrong]
    if (t.size() < 2 || !is_integer(t[0]) || !is_integer(t[1])) continue;
    if (t.size() >= 3 && std::isdigit(static_cast<unsigned char>(t[2][0]))) continue;
    const auto refuse = [&](const std::string& why) {
      throw InputError(file, line_no, "all_reduce_perf", fmt::format("{}: '{}'", why, line));
    };
    if (t.size() != 8 && t.size() != 9 && t.size() != 12 && t.size() != 13)
      refuse(fmt::format("a row of {} columns, not 8, 9, 12 or 13 (cut mid-line?)", t.size()));
    size_t i = 4;
    if (t.size() == 13 || t.size() == 9) ++i;  // has the root column
    std::vector<double> v;
    for (size_t j = i; j < t.size(); ++j) {
      double x = 0;
      const bool wrong_column = (j - i) % 4 == 3;  // "#wrong" may be N/A
      if (!to_double(t[j], x) && !wrong_column) refuse(fmt::format("\"{}\" is not a number", t[j]));
      if (wrong_column && x > 0)
        refuse(fmt::format("{} wrong results (#wrong): the run is not a valid measurement", t[j]));
      if (!wrong_column && !(x >= 0)) refuse(fmt::format("negative time or bandwidth {}", t[j]));
      v.push_back(x);
    }
    double size = 0, count = 0;
    if (!to_double(t[0], size) || !to_double(t[1], count))
      refuse(fmt::format("size {} or count {} is beyond any buffer (a damaged row)", t[0], t[1]));
    if (const int element = element_bytes(t[2]); element > 0 && count * element != size) {
      refuse(fmt::format("size {} bytes is not count {} x {} bytes of {} (size and count swapped, or a damaged row)",
                         t[0], t[1], element, t[2]));
    }
    AllreduceRow row;
    row.bytes = size;
    row.time_s = v[0] * 1e-6;
    row.algbw_GBps = v[1];
    row.busbw_GBps = v[2];
    if (v.size() >= 7) {
      row.inplace_time_s = v[4] * 1e-6;
      row.inplace_algbw_GBps = v[5];
      row.inplace_busbw_GBps = v[6];
    }
    cal.allreduce.push_back(row);
  }
  if (cal.allreduce.empty()) throw InputError(file, 0, "all_reduce_perf", "no all_reduce_perf data rows found");
  cal.allreduce_world_size = static_cast<int>(ranks.size());
  if (cal.allreduce_world_size == 0) {  // no rank lines: infer n from busbw/algbw = 2(n-1)/n
    for (const auto& r : cal.allreduce)
      if (r.algbw_GBps > 0 && r.busbw_GBps > 0) {
        const double f = r.busbw_GBps / r.algbw_GBps;
        if (f < 2.0 - 1e-3) cal.allreduce_world_size = static_cast<int>(std::lround(2.0 / (2.0 - f)));
        break;
      }
  }
  if (!gpu.empty()) cal.context["gpu"] = gpu;
  if (!host.empty()) cal.context["host"] = host;
  cal.context["gpu_count"] = std::to_string(cal.allreduce_world_size);
  return cal;
}

std::string nccl_tests_header() {
  return "#                                                              out-of-place                       in-place   "
         "       \n"
         "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
         "busbw #wrong\n"
         "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  "
         "(GB/s)       \n";
}

std::string nccl_tests_row(const AllreduceRow& r, int element_bytes, const char* type_name) {
  const auto count = static_cast<long long>(r.bytes / std::max(1, element_bytes));
  return fmt::format(
      "{:>12} {:>13} {:>9} {:>7} {:>7} {:>8.2f} {:>7.2f} {:>7.2f} {:>6} {:>8.2f} {:>7.2f} {:>7.2f} {:>6}\n",
      static_cast<long long>(r.bytes), count, type_name, "sum", -1, r.time_s * 1e6, r.algbw_GBps, r.busbw_GBps, "N/A",
      r.inplace_time_s * 1e6, r.inplace_algbw_GBps, r.inplace_busbw_GBps, "N/A");
}

}  // namespace dpsim
