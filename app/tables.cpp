#include "tables.hpp"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "dpsim/result.hpp"

namespace dpsim::app {

std::string render_sections(const std::vector<Section>& sections) {
  size_t width = 0;
  for (const auto& s : sections) {
    for (const auto& [label, value] : s.rows) width = std::max(width, label.size());
  }
  std::string out;
  for (const auto& s : sections) {
    out += s.title + "\n";
    for (const auto& [label, value] : s.rows) out += fmt::format("  {:<{}}  {}\n", label, width, value);
  }
  return out;
}

std::string render_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i)
      line += (i == 0 ? fmt::format("{:<{}}", row[i], widths[i]) : fmt::format("{:>{}}", row[i], widths[i])) +
              (i + 1 < row.size() ? "  " : "");
    out += line + "\n";
  }
  return out;
}

void emit(const std::string& text, const std::string& path) {
  if (path.empty()) {
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  } else {
    write_file_atomic(path, text);
  }
}

}  // namespace dpsim::app
