#pragma once
// A sweep run by an MPI launcher as several ranks (mpirun -np N dpsim sweep ..., srun ... dpsim sweep ...).
// Rank r of N runs slice split_shard(r, N) of the points with its own -j workers, in DIR/.ranks/r/; then
// every rank sends its JSON lines to rank 0, which writes DIR/results.jsonl and DIR/results.csv in point
// order: the same bytes as one process running the same sweep. --resume skips every point already in
// DIR/results.jsonl or in a DIR/.ranks/*/results.jsonl an interrupted run left. A rank that fails stops
// every rank (MPI_Abort) with its message. A dpsim built without MPI refuses to run as several ranks.
#include "dpsim/sweep/runner.hpp"

namespace dpsim {

struct LaunchedSweep {
  SweepSummary summary;  // every rank's points added up (on every rank)
  int rank = 0;          // rank 0 prints, plots and owns DIR/results.*
  int ranks = 1;
};

// Runs the sweep as this process's share: the whole of it when no launcher started several ranks.
LaunchedSweep run_sweep_launched(const SweepSpec& sweep, const SweepOptions& options);

}  // namespace dpsim
