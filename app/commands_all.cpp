// dpsim's subcommands: those of the parts this build has (the others are absent from --help).
#include "commands.hpp"

namespace dpsim::app {

#ifndef DPSIM_HAVE_SIM
void register_predict(CLI::App&) {}
#endif
#ifndef DPSIM_HAVE_BACKEND
void register_measure(CLI::App&) {}
#endif
#ifndef DPSIM_HAVE_VALIDATION
void register_validate(CLI::App&) {}
void register_calibrate(CLI::App&) {}
#endif
#ifndef DPSIM_HAVE_SWEEP
void register_sweep(CLI::App&) {}
void register_plot(CLI::App&) {}
#endif

void register_all(CLI::App& app) {
  register_estimate(app);
  register_inspect(app);
  register_predict(app);
  register_measure(app);
  register_validate(app);
  register_calibrate(app);
  register_sweep(app);
  register_plot(app);
}

}  // namespace dpsim::app
