#pragma once
// The commands that need heavy libraries run in their own executables, so that a dpsim process maps only what its
// command needs (CUDA, cuBLAS, NCCL and MPI cost ~210 MB and ~0.1 s at start; SimGrid and its ns-3 libraries ~30 MB
// and ~30 ms, and only the step that lays flows loads them, as a plugin: sim/src/simgrid_plugin.hpp):
//   dpsim            estimate, inspect, measure --dry-run (none of them)
//   dpsim-sim        predict, validate, calibrate, sweep, plot (the simulator; SimGrid's plugin when a step needs it)
//   dpsim-measure    measure on GPUs and measure --calibrate (CUDA, cuBLASLt, NCCL, MPI)
//   dpsim-sweep-mpi  a sweep as one of several MPI ranks, mpirun/srun (MPI)
// A command hands over by exec: same process, same environment (an MPI launcher's rank stays that rank), the
// same arguments.
#include <string>
#include <vector>

namespace dpsim::app {

// Called by run(): the command line a helper is given.
void set_command_line(int argc, char** argv);

// Where `name` is looked for, in order: next to this executable (/proc/self/exe), then each PATH directory.
std::vector<std::string> helper_candidates(const std::string& name);

// Replaces this process with helper `name` running this process's arguments (argv[0] included). Returns only when no
// candidate is an executable file: then throws RuntimeError("<missing> (looked for: ...)"). A candidate that exists but
// cannot be run (exec fails) throws RuntimeError naming it and why. A helper whose own libraries are missing
// is refused by the dynamic loader, which names the library (exit status 127).
[[noreturn]] void run_helper(const std::string& name, const std::string& missing);

}  // namespace dpsim::app
