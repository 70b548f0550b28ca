// dpsim-measure: `dpsim measure` on GPUs, which dpsim runs in its place (app/helper.hpp); the one executable
// that links CUDA, cuBLASLt, NCCL and MPI.
#include "commands.hpp"

int main(int argc, char** argv) { return dpsim::app::run(argc, argv, dpsim::app::register_measure); }
