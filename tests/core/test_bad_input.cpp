// The catalogue in tests/bad-inputs/: each file's first line "# expect: MESSAGE" (or a line in
// expected.txt) is the exact error dpsim must give for it; {file} is the file's path, {dir} its folder's parent.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "dpsim/error.hpp"
#include "dpsim/load.hpp"

using namespace dpsim;
namespace fs = std::filesystem;

namespace {

std::string substitute(std::string text, const fs::path& file) {
  const auto replace = [&](const std::string& key, const std::string& value) {
    for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
      text.replace(at, key.size(), value);
  };
  replace("{file}", file.string());
  replace("{dir}", file.parent_path().string());
  return text;
}

std::map<std::string, std::string> expectations(const fs::path& dir) {
  std::map<std::string, std::string> out;
  std::ifstream list(dir / "expected.txt");
  for (std::string line; std::getline(list, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto colon = line.find(": ");
    out[line.substr(0, colon)] = line.substr(colon + 2);
  }
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    std::ifstream in(entry.path());
    std::string first;
    std::getline(in, first);
    const std::string tag = "# expect: ";
    if (first.rfind(tag, 0) == 0) out[entry.path().filename().string()] = first.substr(tag.size());
  }
  return out;
}

}  // namespace

TEST_CASE("every bad input gets its exact message, as an InputError") {
  const fs::path dir = fs::path(DPSIM_SOURCE_DIR) / "tests" / "bad-inputs";
  const auto cases = expectations(dir);
  REQUIRE(cases.size() >= 15);
  for (const auto& [name, message] : cases) {
    const fs::path file = dir / name;
    INFO("input: " << file.string());
    std::string got = "(no error)";
    try {
      load_scenario(file);
    } catch (const InputError& e) {
      got = e.what();
    }
    CHECK(got == substitute(message, file));
  }
}

TEST_CASE("a missing file and a directory are input errors naming the path") {
  CHECK_THROWS_WITH(load_scenario("/nonexistent/x.yaml"), "/nonexistent/x.yaml: no such file");
  CHECK_THROWS_WITH(load_scenario(DPSIM_SOURCE_DIR), std::string(DPSIM_SOURCE_DIR) + ": is a directory, not a file");
}
