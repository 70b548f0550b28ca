// dpsim-sim: the commands that simulate (predict, validate, calibrate, sweep, plot), which dpsim runs in its place
// (app/helper.hpp); it links SimGrid, and neither CUDA nor MPI.
#include "commands.hpp"

int main(int argc, char** argv) { return dpsim::app::run(argc, argv, dpsim::app::register_all); }
