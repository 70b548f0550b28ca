// The launchers' variables: Open MPI's mpirun (OMPI_COMM_WORLD_SIZE), MPICH/Intel MPI's Hydra and
// srun --mpi=pmi2 (PMI_SIZE), and srun itself (SLURM_STEP_NUM_TASKS; not SLURM_NTASKS, which a batch
// script's own shell also carries).
#include "dpsim/launcher.hpp"

#include <cstdlib>

namespace dpsim {

MpiLaunch mpi_launch() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"}) {
    const char* value = std::getenv(name);
    if (value && std::atoi(value) > 1) return {std::atoi(value), std::string(name) + "=" + value};
  }
  return {};
}

}  // namespace dpsim
