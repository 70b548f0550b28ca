#pragma once
// Small helpers the subcommands share: aligned two-column sections and output to a file or stdout.
#include <string>
#include <utility>
#include <vector>

namespace dpsim::app {

struct Section {
  std::string title;
  std::vector<std::pair<std::string, std::string>> rows;
  void add(std::string label, std::string value) { rows.emplace_back(std::move(label), std::move(value)); }
};

std::string render_sections(const std::vector<Section>& sections);

// Columns separated by two spaces, each as wide as its widest cell; first row is the header.
std::string render_table(const std::vector<std::vector<std::string>>& rows);

// Print to stdout, or write atomically to `path` when it is not empty.
void emit(const std::string& text, const std::string& path);

}  // namespace dpsim::app
