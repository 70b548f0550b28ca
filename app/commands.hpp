#pragma once
// One register function per subcommand; each lives in its own app/cmd_*.cpp file.
// A command's callback throws on error; main() turns exceptions into exit codes
// (InputError -> 2, anything else -> 1) and prints "dpsim: error: ..." on stderr.
#include <CLI/CLI.hpp>

namespace dpsim::app {

// The whole command line: parse, dispatch, turn errors into exit codes. Returns the exit status.
// register_commands adds the subcommands: every one for dpsim, one for a helper (app/helper.hpp).
int run(int argc, char** argv, void (*register_commands)(CLI::App&));

// Every subcommand this build has, run in this process: dpsim-sim's (app/commands_all.cpp).
void register_all(CLI::App& app);
// dpsim's: estimate, inspect and measure, and the commands that run in dpsim-sim, which it hands to dpsim-sim
// with their arguments untouched (app/commands_lean.cpp).
void register_lean(CLI::App& app);

void register_estimate(CLI::App& app);
void register_inspect(CLI::App& app);
void register_inspect_topology(CLI::App& inspect);  // app/cmd_inspect_topology.cpp
void register_inspect_gpus(CLI::App& inspect);      // app/cmd_inspect_gpus.cpp
void register_inspect_ops(CLI::App& inspect);       // app/cmd_inspect_ops.cpp
void register_predict(CLI::App& app);               // app/cmd_predict.cpp (simulator)
void register_measure(CLI::App& app);               // app/cmd_measure.cpp (GPU backend)
void register_validate(CLI::App& app);              // app/cmd_validate.cpp (validation)
void register_calibrate(CLI::App& app);             // app/cmd_calibrate.cpp (validation)
void register_sweep(CLI::App& app);                 // app/cmd_sweep.cpp (sweep/)
void register_plot(CLI::App& app);                  // app/cmd_sweep.cpp (sweep/)
void register_import_torch(CLI::App& app);          // app/cmd_import_torch.cpp (execs python3)

}  // namespace dpsim::app
