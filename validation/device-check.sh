#!/usr/bin/env bash
# The GPU backend's device check, for a lent single-H200 machine (see docs/backend.md).
#
#   validation/device-check.sh prepare   # HERE (no GPU): build, bundle binaries + small libraries
#   validation/device-check.sh run       # THERE (H200): gpu tests, measure, calibrate -> results
#
# prepare builds build-gpu/ (Release, CUDA backend, no MPI) and copies dpsim, dpsim_gpu_tests and
# their small non-system shared libraries (yaml-cpp, fmt, SimGrid and its Boost parts, cudart) into
# .device-bundle/ (ignored through .git/info/exclude; carry it: carry=[".device-bundle"]). cuBLAS,
# cuBLASLt and NCCL are too large to carry (64 MiB limit): on the H200 machine they exist in the
# Python packages nvidia-cublas and nvidia-nccl-cu13, which `run` finds and puts on LD_LIBRARY_PATH.
# If the bundled binary does not start there, `run` falls back to building on the machine with its
# own nvcc and cmake (needs the Debian dev packages, usually absent: then it says so).
#
# run writes at most 8 files (the device tool's limit) to $OUT/results, or, without $OUT, to
# validation/measured/<date>/:
#   device-check.log  everything printed, in order     gpu-tests.txt  the `gpu` Catch2 tests
#   measure-*.json    measured StepResults (with context)   calibration-H200.yaml  --calibrate output
# Everything together must finish in under 8 minutes; each step has its own timeout.
set -u -o pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bundle=.device-bundle

prepare() {
  set -e
  grep -qx '/.device-bundle/' .git/info/exclude 2>/dev/null || echo '/.device-bundle/' >> .git/info/exclude
  grep -qx '/build-gpu/' .git/info/exclude 2>/dev/null || echo '/build-gpu/' >> .git/info/exclude
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DDPSIM_CUDA=ON -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON >/dev/null
  cmake --build build-gpu -j"$(nproc)" --target dpsim dpsim_gpu_tests
  rm -rf "$bundle" && mkdir -p "$bundle/bin" "$bundle/lib"
  cp build-gpu/dpsim build-gpu/tests/backend/dpsim_gpu_tests "$bundle/bin/"
  strip "$bundle"/bin/* || true
  # Non-system libraries, minus the driver and the big CUDA libraries found on the machine.
  for bin in "$bundle"/bin/*; do
    ldd "$bin" | awk '/=> \// {print $3}'
  done | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) ;;
      libcuda.so*|libcublas*|libnccl*|libnvidia*) ;;
      *) cp -L "$lib" "$bundle/lib/" ;;
    esac
  done
  strip --strip-unneeded "$bundle"/lib/* 2>/dev/null || true
  du -sh "$bundle"
  echo "prepared $bundle; on the device: validation/device-check.sh run (carry .device-bundle)"
}

run() {
  local out
  if [ -n "${OUT:-}" ]; then out="$OUT/results"; else out="validation/measured/$(date -u +%Y-%m-%d)"; fi
  mkdir -p "$out"
  local log="$out/device-check.log"
  exec > >(tee -a "$log") 2>&1
  echo "== dpsim device check $(date -u +%FT%TZ) on $(hostname)"
  nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version,clocks.sm,clocks.mem --format=csv || true

  # cuBLAS / cuBLASLt / NCCL / cudart from the machine's Python packages.
  local site libdirs=""
  site=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
  for d in $site; do
    [ -d "$d/nvidia" ] || continue
    libdirs+=$(find "$d/nvidia" \( -name 'libcublas*.so*' -o -name 'libnccl.so*' -o -name 'libcudart.so*' \) -printf '%h\n' | sort -u | tr '\n' ':')
  done
  export LD_LIBRARY_PATH="$here/$bundle/lib:${libdirs}${LD_LIBRARY_PATH:-}"
  export DPSIM_DATA_DIR="$here"  # data/, topologies/, models/ of this checkout
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  local dpsim="$here/$bundle/bin/dpsim" tests="$here/$bundle/bin/dpsim_gpu_tests"
  if ! "$dpsim" --version >/dev/null 2>&1; then
    echo "!! bundled dpsim does not start here:"; ldd "$dpsim" | grep 'not found' || "$dpsim" --version
    echo "!! trying a build on this machine"
    if cmake -S . -B build-device -DCMAKE_BUILD_TYPE=Release -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON >/dev/null &&
       cmake --build build-device -j16 --target dpsim dpsim_gpu_tests >/dev/null; then
      dpsim="$here/build-device/dpsim"; tests="$here/build-device/tests/backend/dpsim_gpu_tests"
    else
      echo "!! no build possible here (missing dev packages?); stopping"; return 1
    fi
  fi
  "$dpsim" --version

  echo "== gpu tests"
  timeout 120 "$tests" --durations yes 2>&1 | tee "$out/gpu-tests.txt"
  echo "gpu tests exit code: ${PIPESTATUS[0]}"

  local step=0
  measure() {  # name scenario [args...]
    local name=$1 scen=$2; shift 2
    step=$((step + 1))
    echo "== [$step] measure $scen $*"
    timeout 150 "$dpsim" measure "$scen" --json -o "$out/measure-$name.json" "$@"
    echo "exit code: $?"
  }
  measure gpt2-124m scenarios/gpt2-124m-4xrtx4090.yaml --gpus 1
  measure resnet50 scenarios/resnet50-8xv100.yaml --gpus 1
  # Llama 3.1 8B as shipped (8192 tokens, no bucket views) on one H200: refused with the memory
  # message if it does not fit (no file then; the message is in this log).
  step=$((step + 1)); echo "== [$step] measure scenarios/llama3.1-8b-8xh200.yaml --gpus 1 (as shipped)"
  timeout 150 "$dpsim" measure scenarios/llama3.1-8b-8xh200.yaml --gpus 1 --warmup 2 --iters 5; echo "exit code: $?"
  measure llama3.1-8b-1xh200-seq2048 validation/device/llama3.1-8b-1xh200-seq2048.yaml
  echo "== --calibrate (Llama 3.1 8B shapes at 2048 tokens)"
  timeout 150 "$dpsim" measure validation/device/llama3.1-8b-1xh200-seq2048.yaml --calibrate \
    --calibration-out "$out/calibration-H200.yaml"
  echo "exit code: $?"
  nvidia-smi --query-gpu=name,memory.used,clocks.sm --format=csv || true
  echo "== done $(date -u +%FT%TZ); results in $out:"; ls -la "$out"
}

case "${1:-}" in
  prepare) prepare ;;
  run) run ;;
  *) echo "usage: $0 prepare|run" >&2; exit 2 ;;
esac
