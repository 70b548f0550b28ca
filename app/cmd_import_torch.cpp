// dpsim import-torch: runs python/dpsim/import_torch.py (shipped with dpsim's data, under DATA_ROOT/python) with
// Debian's python3 (or $DPSIM_PYTHON), its arguments untouched, by exec: the import needs PyTorch, dpsim does not.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.hpp"
#include "dpsim/error.hpp"
#include "dpsim/load.hpp"
#include "helper.hpp"

namespace dpsim::app {

namespace {

constexpr const char* kDefaultPython = "/usr/bin/python3";  // Debian's, where python3-torch installs

void run_import(const std::vector<std::string>& args) {
  const char* env = std::getenv("DPSIM_PYTHON");
  const std::string python = env && *env ? env : kDefaultPython;
  const std::filesystem::path dir = data_root() / "python";
  std::error_code ec;
  if (!std::filesystem::exists(dir / "dpsim" / "import_torch.py", ec))
    throw RuntimeError(fmt::format("cannot find dpsim's importer {}", (dir / "dpsim" / "import_torch.py").string()));
  const char* old = std::getenv("PYTHONPATH");
  const std::string path = dir.string() + (old && *old ? ":" + std::string(old) : "");
  setenv("PYTHONPATH", path.c_str(), 1);
  std::vector<std::string> argv{python, "-m", "dpsim.import_torch"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> c_argv;
  for (std::string& a : argv) c_argv.push_back(a.data());
  c_argv.push_back(nullptr);
  std::fflush(nullptr);
  execvp(python.c_str(), c_argv.data());
  throw RuntimeError(
      fmt::format("cannot run {} (set DPSIM_PYTHON to a python3 with torch): {}", python, std::strerror(errno)));
}

}  // namespace

void register_import_torch(CLI::App& app) {
  auto* cmd = app.add_subcommand("import-torch",
                                 "Import a PyTorch model (MODULE:CALLABLE) as a layer list: runs python3 -m "
                                 "dpsim.import_torch (docs/python.md)");
  cmd->prefix_command();  // every argument after the name is the importer's, --help too
  cmd->set_help_flag();
  cmd->callback([cmd] { run_import(cmd->remaining()); });
}

}  // namespace dpsim::app
