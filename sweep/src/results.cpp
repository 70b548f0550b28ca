// The output directory of a sweep: lock, results files, and the check of recorded rows on --resume.
#include "results.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dpsim/error.hpp"
#include "dpsim/hash.hpp"
#include "dpsim/result.hpp"
#include "dpsim/sweep/runner.hpp"

namespace dpsim {

namespace fs = std::filesystem;
using nlohmann::json;

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

DirLock::DirLock(const fs::path& dir) {
  fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) throw RuntimeError(fmt::format("cannot open {}: {}", dir.string(), std::strerror(errno)));
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
  const int err = errno;
  ::close(fd_);
  if (err == EWOULDBLOCK) {
    throw RuntimeError(
        fmt::format("{} is in use: another dpsim sweep is writing into it; wait for it to finish, or choose another -o",
                    dir.string()));
  }
  throw RuntimeError(fmt::format("cannot lock {}: {}", dir.string(), std::strerror(err)));
}

DirLock::~DirLock() { ::close(fd_); }

std::map<int64_t, std::string> parse_results(const std::string& text, const std::string& file) {
  std::map<int64_t, std::string> out;
  size_t start = 0;
  for (int line_no = 1; start < text.size(); ++line_no) {
    const size_t end = text.find('\n', start);
    if (end == std::string::npos) break;  // a partial last line: its point runs again
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    try {
      const json j = json::parse(line);
      out[j.at("point").get<int64_t>()] = line;
    } catch (const std::exception&) {
      throw InputError(file, line_no, "",
                       "not a result row (the file was edited or corrupted); remove the line, or run the sweep "
                       "again without --resume");
    }
  }
  return out;
}

std::map<int64_t, std::string> read_results(const fs::path& jsonl) {
  return parse_results(read_text(jsonl), jsonl.string());
}

namespace {

// The axis values of `row` that differ from what this sweep gives its point ("" when none differ).
std::string changed_axes(const SweepSpec& sweep, int64_t index, const json& row) {
  std::string out;
  const json axes = row.value("axes", json::object());
  for (const auto& o : sweep_point(sweep, index)) {
    const std::string was = axes.contains(o.key_path) ? axes[o.key_path].get<std::string>() : "(none)";
    if (was != o.value)
      out += fmt::format("{}{} was {}, the sweep now gives {}", out.empty() ? "" : "; ", o.key_path, was, o.value);
  }
  if (axes.size() != sweep.axes.size() && out.empty()) out = "the sweep's axes changed";
  return out;
}

}  // namespace

void check_recorded(const SweepSpec& sweep, const fs::path& jsonl, const std::map<int64_t, std::string>& rows) {
  const auto count = static_cast<int64_t>(sweep.point_count());
  std::map<std::string, std::string> now;  // path -> current hash, each file read once
  std::set<std::string> changed;
  const auto refuse = [&](const std::string& why) {
    throw InputError(
        jsonl.string(), 0, "",
        fmt::format("--resume refused: {}. Run without --resume to start over, or choose another -o", why));
  };
  for (const auto& [index, text] : rows) {
    if (index < 0 || index >= count)
      refuse(fmt::format("it holds point {}, outside this sweep (points 0 to {})", index, count - 1));
    const json row = json::parse(text);
    if (const std::string axes = changed_axes(sweep, index, row); !axes.empty())
      refuse(fmt::format("point {} was recorded by another sweep: {}", index, axes));
    if (!row.contains("inputs"))
      refuse(fmt::format("point {} was recorded without its inputs (an older dpsim)", index));
    for (const auto& [path, hash] : row["inputs"].items()) {
      if (!now.count(path)) {
        std::error_code ec;
        now[path] = fs::exists(path, ec) ? fnv1a64(read_text(path)) : "missing";
      }
      if (now[path] != hash.get<std::string>()) changed.insert(path + (now[path] == "missing" ? " (removed)" : ""));
    }
  }
  if (!changed.empty()) {
    std::string list;
    for (const auto& c : changed) list += (list.empty() ? "" : ", ") + c;
    refuse("these inputs changed since its points were recorded: " + list);
  }
}

std::string csv_header_line(const SweepSpec& sweep) {
  std::string h;
  for (const auto& c : csv_header(sweep)) h += (h.empty() ? "" : ",") + c;
  return h;
}

void write_results(const SweepSpec& sweep, const fs::path& dir, const std::map<int64_t, std::string>& lines,
                   const std::map<int64_t, std::string>& csv_rows) {
  std::string jsonl, csv = csv_header_line(sweep) + "\n";
  for (const auto& [index, line] : lines) {
    jsonl += line + "\n";
    const auto rendered = csv_rows.find(index);
    csv += (rendered != csv_rows.end() ? rendered->second : csv_row(sweep, line)) + "\n";
  }
  write_file_atomic(dir / "results.jsonl", jsonl);
  write_file_atomic(dir / "results.csv", csv);
}

void append_line(const fs::path& file, const std::string& line) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw RuntimeError(fmt::format("cannot write {}: {}", file.string(), std::strerror(errno)));
  const std::string text = line + "\n";
  const ssize_t n = ::write(fd, text.data(), text.size());
  const int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) {
    throw RuntimeError(
        fmt::format("cannot write {}: {}", file.string(), n < 0 ? std::strerror(err) : "short write (disk full?)"));
  }
}

}  // namespace dpsim
