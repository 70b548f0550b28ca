// dpsim's subcommands: estimate, inspect and measure run here; the commands that simulate run in dpsim-sim (the
// simulator), to which dpsim hands its arguments untouched, --help included, so that dpsim itself stays small.
#include "commands.hpp"
#include "helper.hpp"
#include "summaries.hpp"

namespace dpsim::app {

namespace {

void register_in_dpsim_sim(CLI::App& app, const char* name, const char* summary) {
  auto* cmd = app.add_subcommand(name, summary);
  cmd->prefix_command();  // every argument after the name is dpsim-sim's to parse
  cmd->set_help_flag();   // --help too: dpsim-sim shows the command's options
  cmd->callback([] {
    run_helper("dpsim-sim",
               "dpsim predict, validate, calibrate, sweep and plot run in dpsim-sim (the simulator), installed next to "
               "dpsim, and it was not found");
  });
}

}  // namespace

#ifndef DPSIM_HAVE_BACKEND
void register_measure(CLI::App&) {}
#endif

void register_lean(CLI::App& app) {
  register_estimate(app);
  register_inspect(app);
  register_import_torch(app);
#ifdef DPSIM_HAVE_SIM
  register_in_dpsim_sim(app, "predict", kPredictSummary);
#endif
  register_measure(app);
#ifdef DPSIM_HAVE_VALIDATION
  register_in_dpsim_sim(app, "validate", kValidateSummary);
  register_in_dpsim_sim(app, "calibrate", kCalibrateSummary);
#endif
#ifdef DPSIM_HAVE_SWEEP
  register_in_dpsim_sim(app, "sweep", kSweepSummary);
  register_in_dpsim_sim(app, "plot", kPlotSummary);
#endif
}

}  // namespace dpsim::app
