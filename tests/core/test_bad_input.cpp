// The catalogue in tests/bad-inputs/: each file's first line "# expect: MESSAGE" (or a line in
// expected.txt) is the exact error dpsim must give for it; {file} is the file's path, {dir} its folder's parent,
// {data} dpsim's data root (data_root(): where data/gpus.yaml is).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../source_dir.hpp"
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
  replace("{data}", data_root().string());
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

namespace {

// load_scenario's error message, from a child process without root's privileges when we are root (CI runs
// as root, where chmod 000 does not stop reads): the child drops to nobody before loading.
std::string load_error_unprivileged(const fs::path& file) {
  const auto message = [&]() -> std::string {
    try {
      load_scenario(file);
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no error)";
  };
  if (::geteuid() != 0) return message();
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(fds[0]);
    std::string out = "(could not drop privileges)";
    if (::setgid(65534) == 0 && ::setuid(65534) == 0) out = message();
    const ssize_t written = ::write(fds[1], out.data(), out.size());
    ::_exit(written == static_cast<ssize_t>(out.size()) ? 0 : 1);
  }
  ::close(fds[1]);
  std::string out;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) out.append(buffer, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WIFEXITED(status));
  return out;
}

}  // namespace

TEST_CASE("an unreadable file is an input error naming the path, even when the tests run as root") {
  char pattern[] = "/tmp/dpsim-unreadable-XXXXXX";
  REQUIRE(::mkdtemp(pattern) != nullptr);
  const fs::path dir(pattern);
  ::chmod(pattern, 0755);  // the unprivileged child must reach the file to be refused by its mode
  const fs::path file = dir / "scenario.yaml";
  fs::copy_file(fs::path(DPSIM_SOURCE_DIR) / "scenarios" / "llama3.1-8b-8xh100.yaml", file);
  ::chmod(file.c_str(), 0);
  CHECK(load_error_unprivileged(file) == file.string() + ": cannot be read (permission denied?)");
  fs::remove_all(dir);
}

TEST_CASE("a device or pipe is read with the same size limit as a file") {
  CHECK_THROWS_WITH(load_scenario("/dev/zero"),
                    "/dev/zero: file is more than 16777216 bytes; input files are limited to 16777216 bytes");
  CHECK_THROWS_WITH(load_scenario("/dev/null"), "/dev/null: the file is empty");
}
