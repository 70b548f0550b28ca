#!/usr/bin/env bash
# dpsim maps neither SimGrid, CUDA, cuBLAS, NCCL nor MPI, and dpsim-sim no CUDA, NCCL or MPI (ldd); the helpers'
# commands say which helper is missing and where it was looked for when it is not there, while the commands
# dpsim runs itself (estimate, measure --dry-run) still work.
# Usage: linked_libraries.sh BUILD_DIR SOURCE_DIR. Skips (77) when ldd is absent.
set -u
build=$1
src=$2
command -v ldd >/dev/null || { echo "SKIP: ldd not found"; exit 77; }
fail=0
bad() { echo "FAIL: $*"; fail=1; }
gpu_mpi='lib(cuda|cudart|cublas|cublasLt|nccl|mpi)[._-]'
libs=$(ldd "$build/dpsim") || bad "ldd $build/dpsim failed"
grep -Eq "$gpu_mpi|libsimgrid" <<<"$libs" && bad "dpsim links $(grep -Eo "$gpu_mpi[^ ]*|libsimgrid[^ ]*" <<<"$libs" | tr '\n' ' ')"
libs=$(ldd "$build/dpsim-sim") || bad "ldd $build/dpsim-sim failed"
grep -q libsimgrid <<<"$libs" || bad "dpsim-sim does not link SimGrid: ldd says $(tr "\n" " " <<<"$libs")"
grep -Eq "$gpu_mpi" <<<"$libs" && bad "dpsim-sim links $(grep -Eo "$gpu_mpi[^ ]*" <<<"$libs" | tr '\n' ' ')"

# dpsim alone in a directory, with no helper in PATH either.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$build/dpsim" "$tmp/dpsim"
s=$src/scenarios/llama3.1-8b-8xh100.yaml
run() { PATH=$tmp/nothing-here "$tmp/dpsim" "$@" >"$tmp/out" 2>&1; }
run estimate "$s" || bad "estimate without helpers: $(head -5 "$tmp/out")"
run measure "$s" --dry-run || bad "measure --dry-run without helpers: $(head -5 "$tmp/out")"
run predict "$s"
status=$?
[[ $status -eq 1 ]] || bad "predict without dpsim-sim: status $status (want 1)"
grep -qF "run in dpsim-sim (SimGrid), installed next to dpsim, and it was not found (looked for: $tmp/dpsim-sim, $tmp/nothing-here/dpsim-sim)" "$tmp/out" ||
  bad "predict without dpsim-sim: $(head -5 "$tmp/out")"
run measure "$s"
status=$?
[[ $status -eq 1 ]] || bad "measure without dpsim-measure: status $status (want 1)"
grep -Eq "(runs on GPUs in dpsim-measure .* was not found|this build has no GPU backend).*\(looked for: $tmp/dpsim-measure, $tmp/nothing-here/dpsim-measure\)" "$tmp/out" ||
  bad "measure without dpsim-measure: $(head -5 "$tmp/out")"
if [[ $fail -eq 0 ]]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi
exit $fail
