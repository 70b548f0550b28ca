// dpsim-sweep-mpi: `dpsim sweep` as one of several MPI ranks, which dpsim runs in its place (app/helper.hpp);
// it links MPI, dpsim does not.
#include "commands.hpp"

int main(int argc, char** argv) { return dpsim::app::run(argc, argv, dpsim::app::register_sweep); }
