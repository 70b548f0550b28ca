#!/usr/bin/env bash
# mpirun -np 2 dpsim sweep writes the same bytes as one process (results.csv, results.jsonl), alone and with
# --shard; --resume under mpirun runs nothing twice; a dpsim built without MPI refuses to run as 2 ranks.
# Usage: sweep_mpi.sh DPSIM SOURCE_DIR HAVE_MPI(0|1). Skips (77) only when mpirun is absent.
set -u
dpsim=$1
src=$2
have_mpi=$3
if ! command -v mpirun >/dev/null; then
  echo "SKIP: mpirun not found (Debian: apt-get install libopenmpi-dev, as scripts/setup.sh does)"
  exit 77
fi
# CI containers run as root, without ssh: Open MPI needs to be told both are fine.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm=isolated OMPI_MCA_btl=self,vader,tcp
mpi=(mpirun --oversubscribe -np 2)
# Under the sanitizer suite (scripts/ci-sanitize.sh), LeakSanitizer reports what Open MPI 4.1's MPI_Init allocates
# and never frees (ompi_op_base_op_select, its dlopen'ed components): not dpsim's memory, and not suppressible by
# module name. The ranks keep every other ASan check; the one-process runs keep leak detection too.
if [[ -n ${ASAN_OPTIONS:-} ]]; then mpi=(env "ASAN_OPTIONS=$ASAN_OPTIONS:detect_leaks=0" "${mpi[@]}"); fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# 7 points of the fast estimate (one fails: 0 nodes), 2 simulated points of predict.
cat >"$tmp/est.yaml" <<EOS
name: mpi-est
base: $src/scenarios/gpt2-1.5b-16xh100-ib.yaml
command: estimate
axes:
  cluster.nodes: [1, 2, 4, 0, 8, 16, 32]
EOS
cat >"$tmp/sim.yaml" <<EOS
name: mpi-sim
base: $src/scenarios/gpt2-1.5b-16xh100-ib.yaml
axes:
  ddp.bucket_cap: [4MiB, 25MiB]
EOS
fail=0
check() { # NAME ARGS...: one process into $tmp/NAME-1, two ranks into $tmp/NAME-2, compare
  local name=$1
  shift
  "$dpsim" sweep "$@" -o "$tmp/$name-1" -j 2 -q || { echo "FAIL: $name: one process exited $?"; fail=1; }
  "${mpi[@]}" "$dpsim" sweep "$@" -o "$tmp/$name-2" -j 1 -q 2>"$tmp/$name.err" || {
    echo "FAIL: $name: mpirun exited $?"
    cat "$tmp/$name.err"
    fail=1
  }
  for f in results.csv results.jsonl; do
    cmp "$tmp/$name-1/$f" "$tmp/$name-2/$f" || { echo "FAIL: $name: $f differs from one process's"; fail=1; }
  done
  [[ -e $tmp/$name-2/.ranks ]] && { echo "FAIL: $name: .ranks left behind"; fail=1; }
  echo "$name: $(($(wc -l <"$tmp/$name-2/results.csv") - 1)) rows"
}
if [[ $have_mpi == 1 ]]; then
  check est "$tmp/est.yaml"
  check shard "$tmp/est.yaml" --shard 1/2
  check sim "$tmp/sim.yaml"
  grep -q ',error,' "$tmp/est-2/results.csv" || { echo "FAIL: the failing point is not recorded"; fail=1; }
  before=$(cat "$tmp/est-2/results.jsonl")
  "${mpi[@]}" "$dpsim" sweep "$tmp/est.yaml" -o "$tmp/est-2" -q --resume 2>"$tmp/resume.err" || fail=1
  grep -q "0 run now (0 failed), 7 already done" "$tmp/resume.err" || { echo "FAIL: resume:"; cat "$tmp/resume.err"; fail=1; }
  [[ $(cat "$tmp/est-2/results.jsonl") == "$before" ]] || { echo "FAIL: resume changed results.jsonl"; fail=1; }
else
  "${mpi[@]}" "$dpsim" sweep "$tmp/est.yaml" -o "$tmp/no-mpi" -q 2>"$tmp/no-mpi.err" && {
    echo "FAIL: a dpsim without MPI ran as 2 ranks"
    fail=1
  }
  grep -q "built without MPI" "$tmp/no-mpi.err" || { echo "FAIL: no refusal message:"; cat "$tmp/no-mpi.err"; fail=1; }
  [[ -e $tmp/no-mpi/results.csv ]] && { echo "FAIL: the refusing run wrote results"; fail=1; }
fi
if [[ $fail -eq 0 ]]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi
exit $fail
