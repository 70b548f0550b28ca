#pragma once
// Whether this process is one of several ranks started by an MPI launcher (mpirun, mpiexec, srun), read
// from the environment the launcher sets, so it is known before (and without) MPI_Init.
#include <string>

namespace dpsim {

struct MpiLaunch {
  int size = 1;          // ranks the launcher started; 1 when not launched as one of several ranks
  std::string variable;  // the environment variable that said so, e.g. "OMPI_COMM_WORLD_SIZE=2"
};

MpiLaunch mpi_launch();

}  // namespace dpsim
