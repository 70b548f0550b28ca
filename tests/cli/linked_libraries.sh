#!/usr/bin/env bash
# dpsim maps neither SimGrid, CUDA, cuBLAS, NCCL nor MPI, and dpsim-sim none of them either (ldd): SimGrid is the
# plugin libdpsim-simgrid.so, which only a step that lays flows loads; a predict on the direct engine runs without
# it, and one that needs it says where it looked. The helpers' commands say which helper is missing and where it was
# looked for when it is not there, while the commands dpsim runs itself (estimate, measure --dry-run) still work.
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
grep -Eq "$gpu_mpi|libsimgrid" <<<"$libs" && bad "dpsim-sim links $(grep -Eo "$gpu_mpi[^ ]*|libsimgrid[^ ]*" <<<"$libs" | tr '\n' ' ')"
libs=$(ldd "$build/libdpsim-simgrid.so") || bad "ldd $build/libdpsim-simgrid.so failed"
grep -q libsimgrid <<<"$libs" || bad "libdpsim-simgrid.so does not link SimGrid: ldd says $(tr "\n" " " <<<"$libs")"

# Without the plugin: the direct engine's predict runs; a step that lays flows says where it looked, status 1.
s8=$src/scenarios/llama3.1-8b-8xh100.yaml
out=$(DPSIM_SIMGRID_PLUGIN=/nonexistent/libdpsim-simgrid.so "$build/dpsim" predict "$s8" --json 2>&1) ||
  bad "predict on the direct engine without the SimGrid plugin: $(head -5 <<<"$out")"
grep -q '"engine": "dpsim direct' <<<"$out" || bad "predict without the plugin: not the direct engine: $(head -5 <<<"$out")"
out=$(DPSIM_SIMGRID_PLUGIN=/nonexistent/libdpsim-simgrid.so "$build/dpsim" predict "$s8" --fidelity step 2>&1)
status=$?
[[ $status -eq 1 ]] || bad "step fidelity without the SimGrid plugin: status $status (want 1)"
grep -qF "its plugin libdpsim-simgrid.so was not found (looked for: /nonexistent/libdpsim-simgrid.so)" <<<"$out" ||
  bad "step fidelity without the SimGrid plugin: $(head -5 <<<"$out")"
out=$("$build/dpsim" predict "$s8" --fidelity step --json 2>&1) || bad "step fidelity with the plugin: $(head -5 <<<"$out")"
grep -q '"engine": "SimGrid 3' <<<"$out" || bad "step fidelity: not SimGrid's engine: $(head -5 <<<"$out")"

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
grep -qF "run in dpsim-sim (the simulator), installed next to dpsim, and it was not found (looked for: $tmp/dpsim-sim, $tmp/nothing-here/dpsim-sim)" "$tmp/out" ||
  bad "predict without dpsim-sim: $(head -5 "$tmp/out")"
run measure "$s"
status=$?
[[ $status -eq 1 ]] || bad "measure without dpsim-measure: status $status (want 1)"
grep -Eq "(runs on GPUs in dpsim-measure .* was not found|this build has no GPU backend).*\(looked for: $tmp/dpsim-measure, $tmp/nothing-here/dpsim-measure\)" "$tmp/out" ||
  bad "measure without dpsim-measure: $(head -5 "$tmp/out")"
if [[ $fail -eq 0 ]]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi
exit $fail
