// load_yaml_file parses a file once and checks its structure (duplicate keys, keys without a value, one document) on
// the tree, unless the tree may not hold the whole text; a second pass over the parser's events then decides. Over
// every shipped input file and edits of it that break a document's end (a line moved to column 0, a stray flow entry
// or list item, document markers, a line deleted or repeated), the one-parse path gives exactly what the two-pass
// check gives: the same error, or none. A 40-position run of the same edits (47,359 texts) and one over
// validation/reference (5,044) agreed as well when this was written; the suite runs two positions per file.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "../../core/yaml_node.hpp"
#include "../source_dir.hpp"
#include "dpsim/error.hpp"
#include "dpsim/input_file.hpp"

using namespace dpsim;
namespace fs = std::filesystem;

namespace {

std::string outcome(const std::string& text, const fs::path& file, StructurePass pass) {
  try {
    parse_yaml_text(text, file, pass);
  } catch (const InputError& e) {
    return e.what();
  }
  return "accepted";
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1)
    out.push_back(text.substr(start, end - start));
  if (start < text.size()) out.push_back(text.substr(start));
  return out;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// The edited texts of `text`: at a few lines spread over the file, each edit once.
std::vector<std::string> edits(const std::string& text) {
  const std::vector<std::string> lines = lines_of(text);
  std::vector<std::string> out;
  const size_t positions = 2, step = std::max<size_t>(1, lines.size() / positions);
  for (size_t i = 0; i < lines.size(); i += step) {
    const auto with = [&](auto change) {
      std::vector<std::string> l = lines;
      change(l);
      out.push_back(joined(l));
    };
    const auto at = static_cast<std::ptrdiff_t>(i + 1);
    with([&](auto& l) { l[i].erase(0, std::min(l[i].size(), l[i].find_first_not_of(' '))); });  // to column 0
    for (const char* inserted : {", x: 1", "- x", "---", "...", "x: 1", "  ]"})
      with([&](auto& l) { l.insert(l.begin() + at, inserted); });
    with([&](auto& l) { l.insert(l.begin() + at, l[i]); });
    with([&](auto& l) { l.erase(l.begin() + static_cast<std::ptrdiff_t>(i)); });
  }
  return out;
}

}  // namespace

TEST_CASE("one parse where the tree holds the text, else a second pass: the same outcome on every input and edit") {
  size_t files = 0, cases = 0, refused = 0, once_only = 0;
  for (const char* dir : {"scenarios", "models", "topologies", "data", "tests/bad-inputs"}) {
    for (const auto& entry : fs::recursive_directory_iterator(fs::path(DPSIM_SOURCE_DIR) / dir)) {
      const fs::path& f = entry.path();
      if (f.extension() != ".yaml" && f.extension() != ".json") continue;
      const std::string text = read_input_file(f);
      ++files;
      std::vector<std::string> texts = edits(text);
      texts.push_back(text);
      for (const std::string& t : texts) {
        const std::string once = outcome(t, f, StructurePass::as_needed), twice = outcome(t, f, StructurePass::always);
        INFO(f.string() << ":\n" << t);
        CHECK(once == twice);
        ++cases;
        if (once == "accepted") once_only += tree_holds_whole_text(t, YAML::Load(t));
        refused += twice != "accepted";
      }
    }
  }
  CHECK(files > 100);
  CHECK(refused > cases / 10);               // the edits do break files
  CHECK(once_only > (cases - refused) / 2);  // and most accepted texts took the one parse
}

TEST_CASE("every shipped YAML file is read with one parse") {
  for (const char* dir : {"scenarios", "models", "topologies", "data"}) {
    for (const auto& entry : fs::recursive_directory_iterator(fs::path(DPSIM_SOURCE_DIR) / dir)) {
      if (entry.path().extension() != ".yaml") continue;
      const std::string text = read_input_file(entry.path());
      INFO(entry.path().string());
      CHECK(tree_holds_whole_text(text, YAML::Load(text)));
    }
  }
}
