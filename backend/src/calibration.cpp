// nccl-tests log parser and the calibration YAML format (docs/backend.md).
#include "dpsim/backend/calibration.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "dpsim/error.hpp"
#include "dpsim/result.hpp"

namespace dpsim::backend {

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

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// mpirun --tag-output prefixes: "[1,0]<stdout>:", and "[0] " from some launchers.
std::string strip_prefix(std::string line) {
  static const std::regex tag(R"(^\s*\[\d+(,\d+)?\](<stdout>|<stderr>)?:?\s?)");
  return std::regex_replace(line, tag, "");
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
    if (std::regex_search(line, m, rank_re)) {
      ranks.insert(m[1].str() + "@" + m[3].str());
      host = m[3].str();
      gpu = trim(m[4].str());
      continue;
    }
    if (std::regex_search(line, m, version_re)) {
      cal.context["nccl_tests"] = m[1].str();
      const int v = std::stoi(m[2].str());  // NCCL_VERSION_CODE: major*10000 + minor*100 + patch
      cal.context["nccl"] = fmt::format("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
      continue;
    }
    if (line[0] == '#') continue;
    const auto t = split_ws(line);
    // size count type redop [root] time algbw busbw wrong [time algbw busbw wrong]
    if (t.size() < 8 || !is_integer(t[0]) || !is_integer(t[1])) continue;
    if (std::isdigit(static_cast<unsigned char>(t[2][0]))) continue;
    size_t i = 4;
    if (t.size() == 13 || t.size() == 9) ++i;  // has the root column
    std::vector<double> v;
    for (size_t j = i; j < t.size(); ++j) {
      double x = 0;
      v.push_back(to_double(t[j], x) ? x : 0.0);  // "#wrong" may be N/A
    }
    if (v.size() < 3) throw InputError(file, line_no, "all_reduce_perf", "cannot read the row '" + line + "'");
    AllreduceRow row;
    row.bytes = std::stod(t[0]);
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

// ---- YAML ----------------------------------------------------------------------------------

namespace {
std::string num(double x) { return fmt::format("{:.6g}", x); }
std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}
std::string unquote(std::string s) {
  s = trim(s);
  if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front()) {
    std::string out;
    for (size_t i = 1; i + 1 < s.size(); ++i) {
      if (s[i] == '\\' && i + 2 < s.size()) ++i;
      out += s[i];
    }
    return out;
  }
  return s;
}
std::string strip_comment(const std::string& line) {
  bool in_quote = false;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '"') in_quote = !in_quote;
    if (line[i] == '#' && !in_quote && (i == 0 || std::isspace(static_cast<unsigned char>(line[i - 1]))))
      return line.substr(0, i);
  }
  return line;
}
}  // namespace

std::string calibration_to_yaml(const Calibration& c) {
  std::string y;
  y += "# dpsim calibration (docs/backend.md). Units: SI (bytes, seconds, FLOP/s); GB/s columns are 1e9 B/s as "
       "nccl-tests prints.\n";
  y += fmt::format("calibration_version: {}\n", c.version);
  y += "source: " + quote(c.source) + "\n";
  y += "context:\n";
  for (const auto& [k, v] : c.context) y += "  " + k + ": " + quote(v) + "\n";
  y += "peak_flops_per_s: " + num(c.peak_flops_per_s) + "\n";
  y += "gemm_efficiency: " + num(c.gemm_efficiency) + "  # FLOP-weighted over the shapes below\n";
  y += "gemm:\n";
  for (const auto& g : c.gemm)
    y +=
        fmt::format("  - {{m: {}, n: {}, k: {}, batch: {}, dtype: {}, seconds: {}, flops_per_s: {}, efficiency: {}}}\n",
                    g.m, g.n, g.k, g.batch, g.dtype, num(g.seconds), num(g.flops_per_s), num(g.efficiency));
  y += "memory_bandwidth_bytes_per_s: " + num(c.memory_bandwidth_bytes_per_s) + "  # device copy, read + write\n";
  y += "memory_efficiency: " + num(c.memory_efficiency) + "\n";
  y += "optimizer_bytes_per_s: " + num(c.optimizer_bytes_per_s) + "\n";
  y += "overlap_slowdown: " + num(c.overlap_slowdown) + "  # 0: not measured\n";
  y += "allreduce:\n";
  y += fmt::format("  world_size: {}\n", c.allreduce_world_size);
  y += "  rows:\n";
  for (const auto& r : c.allreduce)
    y += fmt::format(
        "    - {{bytes: {}, time_s: {}, algbw_GBps: {}, busbw_GBps: {}, inplace_time_s: {}, inplace_algbw_GBps: {}, "
        "inplace_busbw_GBps: {}}}\n",
        static_cast<long long>(r.bytes), num(r.time_s), num(r.algbw_GBps), num(r.busbw_GBps), num(r.inplace_time_s),
        num(r.inplace_algbw_GBps), num(r.inplace_busbw_GBps));
  return y;
}

namespace {
std::map<std::string, std::string> parse_flow_map(const std::string& text, const std::string& file, int line) {
  const auto b = text.find('{'), e = text.rfind('}');
  if (b == std::string::npos || e == std::string::npos || e < b)
    throw InputError(file, line, "", "expected a {key: value, ...} map");
  std::map<std::string, std::string> out;
  std::stringstream in(text.substr(b + 1, e - b - 1));
  for (std::string item; std::getline(in, item, ',');) {
    const auto colon = item.find(':');
    if (colon == std::string::npos) throw InputError(file, line, "", "expected key: value in '" + trim(item) + "'");
    out[trim(item.substr(0, colon))] = unquote(item.substr(colon + 1));
  }
  return out;
}

double get_num(const std::map<std::string, std::string>& m, const std::string& key, const std::string& file, int line,
               const std::string& path) {
  auto it = m.find(key);
  if (it == m.end()) return 0;
  double x = 0;
  if (!to_double(it->second, x))
    throw InputError(file, line, path + "." + key, "cannot parse \"" + it->second + "\" as a number");
  return x;
}
}  // namespace

Calibration parse_calibration_yaml(const std::string& text, const std::string& file) {
  Calibration c;
  c.version = 0;
  std::istringstream in(text);
  std::string section;  // context | gemm | allreduce | allreduce.rows
  int line_no = 0;
  for (std::string raw; std::getline(in, raw);) {
    ++line_no;
    const std::string line = strip_comment(raw);
    if (trim(line).empty()) continue;
    const size_t indent = line.find_first_not_of(' ');
    const std::string body = trim(line);
    if (indent == 0) {
      const auto colon = body.find(':');
      if (colon == std::string::npos) throw InputError(file, line_no, "", "expected key: value");
      const std::string key = trim(body.substr(0, colon));
      const std::string value = unquote(body.substr(colon + 1));
      section.clear();
      double x = 0;
      auto number = [&]() {
        if (!to_double(value, x)) throw InputError(file, line_no, key, "cannot parse \"" + value + "\" as a number");
        return x;
      };
      if (key == "calibration_version")
        c.version = static_cast<int>(number());
      else if (key == "source")
        c.source = value;
      else if (key == "context" || key == "gemm" || key == "allreduce")
        section = key;
      else if (key == "peak_flops_per_s")
        c.peak_flops_per_s = number();
      else if (key == "gemm_efficiency")
        c.gemm_efficiency = number();
      else if (key == "memory_bandwidth_bytes_per_s")
        c.memory_bandwidth_bytes_per_s = number();
      else if (key == "memory_efficiency")
        c.memory_efficiency = number();
      else if (key == "optimizer_bytes_per_s")
        c.optimizer_bytes_per_s = number();
      else if (key == "overlap_slowdown")
        c.overlap_slowdown = number();
      else
        throw InputError(file, line_no, key, "unknown key");
      continue;
    }
    if (section == "context") {
      const auto colon = body.find(':');
      if (colon == std::string::npos) throw InputError(file, line_no, "context", "expected key: value");
      c.context[trim(body.substr(0, colon))] = unquote(body.substr(colon + 1));
    } else if (section == "gemm") {
      if (body.rfind("- ", 0) != 0) throw InputError(file, line_no, "gemm", "expected a list item");
      const auto m = parse_flow_map(body, file, line_no);
      GemmCalibration g;
      const std::string p = fmt::format("gemm[{}]", c.gemm.size());
      g.m = static_cast<int64_t>(get_num(m, "m", file, line_no, p));
      g.n = static_cast<int64_t>(get_num(m, "n", file, line_no, p));
      g.k = static_cast<int64_t>(get_num(m, "k", file, line_no, p));
      g.batch = std::max<int64_t>(1, static_cast<int64_t>(get_num(m, "batch", file, line_no, p)));
      if (m.count("dtype")) g.dtype = m.at("dtype");
      g.seconds = get_num(m, "seconds", file, line_no, p);
      g.flops_per_s = get_num(m, "flops_per_s", file, line_no, p);
      g.efficiency = get_num(m, "efficiency", file, line_no, p);
      c.gemm.push_back(g);
    } else if (section == "allreduce" || section == "allreduce.rows") {
      if (body.rfind("world_size:", 0) == 0) {
        double x = 0;
        if (!to_double(trim(body.substr(11)), x))
          throw InputError(file, line_no, "allreduce.world_size", "not a number");
        c.allreduce_world_size = static_cast<int>(x);
      } else if (body == "rows:") {
        section = "allreduce.rows";
      } else if (section == "allreduce.rows" && body.rfind("- ", 0) == 0) {
        const auto m = parse_flow_map(body, file, line_no);
        const std::string p = fmt::format("allreduce.rows[{}]", c.allreduce.size());
        AllreduceRow r;
        r.bytes = get_num(m, "bytes", file, line_no, p);
        r.time_s = get_num(m, "time_s", file, line_no, p);
        r.algbw_GBps = get_num(m, "algbw_GBps", file, line_no, p);
        r.busbw_GBps = get_num(m, "busbw_GBps", file, line_no, p);
        r.inplace_time_s = get_num(m, "inplace_time_s", file, line_no, p);
        r.inplace_algbw_GBps = get_num(m, "inplace_algbw_GBps", file, line_no, p);
        r.inplace_busbw_GBps = get_num(m, "inplace_busbw_GBps", file, line_no, p);
        c.allreduce.push_back(r);
      } else {
        throw InputError(file, line_no, "allreduce", "unexpected line '" + body + "'");
      }
    } else {
      throw InputError(file, line_no, "", "unexpected indented line '" + body + "'");
    }
  }
  if (c.version != kCalibrationVersion)
    throw InputError(file, 0, "calibration_version",
                     fmt::format("must be {} (is this a dpsim calibration file?)", kCalibrationVersion));
  return c;
}

Calibration read_calibration(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw InputError(file.string() + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  if (text.find("calibration_version:") != std::string::npos) return parse_calibration_yaml(text, file.string());
  return parse_nccl_tests_log(text, file.string());
}

void write_calibration(const std::filesystem::path& file, const Calibration& calibration) {
  write_file_atomic(file, calibration_to_yaml(calibration));
}

}  // namespace dpsim::backend
