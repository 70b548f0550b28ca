// The Catch2 main of every test executable. Each process gets a temporary directory of its own (TMPDIR, which
// std::filesystem::temp_directory_path reads), so two runs of the suite at once (a build's ctest beside the ASan
// build's) never write or remove each other's fixture files; it is removed when the process ends.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "source_dir.hpp"

const char* dpsim::test::source_dir() { return DPSIM_SOURCE_DIR_PATH; }

int main(int argc, char* argv[]) {
  namespace fs = std::filesystem;
  const fs::path own = fs::temp_directory_path() / ("dpsim-tests-" + std::to_string(getpid()));
  fs::create_directories(own);
  setenv("TMPDIR", own.c_str(), 1);
  const int status = Catch::Session().run(argc, argv);
  std::error_code ignored;
  fs::remove_all(own, ignored);
  return status;
}
