#include "helper.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "dpsim/error.hpp"

namespace dpsim::app {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> g_arguments;  // argv of this process (argv[0] too: the helper's usage line names dpsim)

bool is_executable_file(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && access(path.c_str(), X_OK) == 0;
}

}  // namespace

void set_command_line(int argc, char** argv) { g_arguments.assign(argv, argv + argc); }

std::vector<std::string> helper_candidates(const std::string& name) {
  std::vector<std::string> out;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) out.push_back((self.parent_path() / name).string());
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  for (size_t start = 0; start <= dirs.size();) {
    const size_t colon = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = dirs.substr(start, colon - start);
    if (!dir.empty()) out.push_back((fs::path(dir) / name).string());  // POSIX: an empty entry is the cwd; not here
    start = colon + 1;
  }
  return out;
}

void run_helper(const std::string& name, const std::string& missing) {
  const std::vector<std::string> candidates = helper_candidates(name);
  for (const std::string& candidate : candidates) {
    if (!is_executable_file(candidate)) continue;
    std::vector<char*> argv;
    for (std::string& a : g_arguments) argv.push_back(a.data());
    if (argv.empty()) argv.push_back(const_cast<char*>(candidate.c_str()));
    argv.push_back(nullptr);
    std::fflush(nullptr);
    execv(candidate.c_str(), argv.data());
    throw RuntimeError(fmt::format("cannot run {}: {}", candidate, std::strerror(errno)));
  }
  std::string looked;
  for (size_t i = 0; i < candidates.size(); ++i) looked += (i ? ", " : "") + candidates[i];
  throw RuntimeError(fmt::format("{} (looked for: {})", missing, looked.empty() ? "no directory to look in" : looked));
}

}  // namespace dpsim::app
