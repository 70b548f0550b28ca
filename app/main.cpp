// The dpsim command line (dpsim and its helpers, app/helper.hpp): parse, dispatch, and errors become exit codes
// here only.
#include <cstdio>
#include <exception>

#include <fmt/format.h>

#include "commands.hpp"
#include "dpsim/error.hpp"
#include "dpsim/escape.hpp"
#include "helper.hpp"

namespace dpsim::app {

int run(int argc, char** argv, void (*register_commands)(CLI::App&)) {
  set_command_line(argc, argv);
  CLI::App app{
      "dpsim: predict and measure the step time of distributed training (data, sharded, tensor and pipeline "
      "parallel).\n"
      "Scenarios (YAML) name a model, a batch and a cluster; see docs/scenario-format.md."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "dpsim " DPSIM_VERSION);
  // CLI11 echoes the bad value: control characters in it are shown escaped, as in every input error.
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    std::string text = escape_controls(e.what()) + "\n";
    if (a->get_help_ptr() != nullptr) text += "Run with " + a->get_help_ptr()->get_name() + " for more information.\n";
    return text;
  });
  register_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // --help and --version print and return 0
    return code == 0 ? 0 : 2;      // a bad option is bad input
  } catch (const InputError& e) {
    fmt::print(stderr, "dpsim: error: {}\n", escape_controls(e.what()));
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "dpsim: error: {}\n", escape_controls(e.what()));
    return 1;
  }
  return 0;
}

}  // namespace dpsim::app
