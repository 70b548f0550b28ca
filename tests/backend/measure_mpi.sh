#!/usr/bin/env bash
# Under mpirun a rank that fails says so with its rank and ends the whole job (MPI_Abort) with dpsim's status,
# instead of leaving the others blocked: here every rank fails at the device query (no GPU in CI), and the job
# must end within the timeout with "rank R of 2:" on stderr. On a GPU machine it skips (the ranks would run).
# Usage: measure_mpi.sh DPSIM SOURCE_DIR. Skips (77) when mpirun is absent or a GPU is present.
set -u
dpsim=$1
src=$2
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then echo "SKIP: a GPU is present"; exit 77; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm=isolated OMPI_MCA_btl=self,vader,tcp
out=$(timeout 60 mpirun --oversubscribe -np 2 "$dpsim" measure "$src/scenarios/gpt2-124m-4xrtx4090.yaml" --gpus 2 2>&1)
status=$?
if [ "$status" -eq 124 ]; then echo "FAIL: the job did not end within 60 s"; exit 1; fi
if [ "$status" -ne 1 ]; then echo "FAIL: status $status (want 1)"; echo "$out"; exit 1; fi
if ! grep -qE "^dpsim measure: rank [01] of 2: no CUDA device" <<<"$out"; then
  echo "FAIL: no 'rank R of 2:' message"; echo "$out"; exit 1
fi
echo "ok: the failing ranks named themselves and aborted the job (status 1)"
