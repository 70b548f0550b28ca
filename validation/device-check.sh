#!/usr/bin/env bash
# The GPU backend's device check, for a lent single-H200 machine (see docs/backend.md).
#
#   validation/device-check.sh prepare   # HERE (no GPU): build (JOBS=N parallel jobs, default all), bundle
#   validation/device-check.sh run       # THERE (H200): library checks, gpu tests, measure, calibrate
#   validation/device-check.sh budget    # the time table below, for tests/validation/device_check_budget.sh
#
# prepare builds build-gpu/ (Release, CUDA backend for sm_90 plus compute_90 PTX, no MPI) with an
# $ORIGIN/../lib DT_RPATH and copies dpsim, dpsim-measure (which `dpsim measure` runs, next to it), dpsim_gpu_tests
# and every shared library they load except glibc, the driver
# (libcuda) and the CUDA libraries too large to carry (cuBLAS, cuBLASLt, NCCL: the device tool carries
# 64 MiB) into .device-bundle/ (ignored by .gitignore, as build-gpu/ is; carry it: carry=[".device-bundle"]).
# The target must have: glibc at least the version in .device-bundle/REQUIREMENTS (prepare writes it), an
# NVIDIA driver for CUDA 13, and cuBLAS/cuBLASLt 13 and NCCL 2 (the Python packages nvidia-cublas and
# nvidia-nccl-cu13, which `run` finds and puts on LD_LIBRARY_PATH). Nothing is built on the device.
#
# run writes at most 8 files (the device tool's limit) to $OUT/results, or, without $OUT, to
# validation/measured/<date>/:
#   device-check.log  everything printed, in order      gpu-tests.txt  the `gpu` Catch2 tests
#   measure-*.json    measured StepResults (with context) calibration-H200.yaml  --calibrate output
#   torch-llama-probe.json  PyTorch's Llama 3.1 8B block per kernel, its GEMMs, SDPA, AdamW, copy (issue 15)
# One overall deadline (DEADLINE_S) bounds the run; each step has its own timeout inside it, cut to what is
# left, and every measure runs with a --watchdog shorter than its step, so that a hang names its collective.
set -u -o pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bundle=.device-bundle

# ---- the time table: the whole run, and each step's timeout and watchdog (seconds) ---------------------
DEADLINE_S=535  # the device tool kills a command at 600 s; the machine's start is not in it
STEPS=(  # name timeout_s watchdog_s (0: no collective)
  "libraries 15 0"
  "gpu-tests 100 0"
  "measure-llama3.1-8b-1xh200 110 60"
  "refuse-llama3.1-70b-1xh200 25 20"
  "calibrate 130 60"
  "measure-gpt2-124m 35 20"
  "measure-gpt2-124m-zero3-1xh200 25 15"
  "torch-probe 90 0"
)

budget() {
  echo "deadline_s $DEADLINE_S"
  for s in "${STEPS[@]}"; do echo "step $s"; done
}

step_field() {  # name field(2: timeout, 3: watchdog)
  local s
  for s in "${STEPS[@]}"; do
    set -- $s
    if [ "$1" = "$STEP_NAME" ]; then
      if [ "$FIELD" = 2 ]; then echo "$2"; else echo "$3"; fi
      return
    fi
  done
  echo "no step $STEP_NAME in STEPS" >&2
  exit 2
}

prepare() {
  set -e
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DDPSIM_CUDA=ON -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON \
    -DDPSIM_CUDA_ARCHITECTURES="90-real;90-virtual" \
    -DCMAKE_BUILD_RPATH='$ORIGIN/../lib' -DCMAKE_SKIP_BUILD_RPATH=OFF \
    -DCMAKE_EXE_LINKER_FLAGS='-Wl,--disable-new-dtags' >/dev/null  # DT_RPATH: it also serves the libraries' own needs
  cmake --build build-gpu -j"${JOBS:-$(nproc)}" --target dpsim dpsim-measure dpsim_gpu_tests
  rm -rf "$bundle" && mkdir -p "$bundle/bin" "$bundle/lib"
  cp build-gpu/dpsim build-gpu/dpsim-measure build-gpu/tests/backend/dpsim_gpu_tests "$bundle/bin/"
  strip "$bundle"/bin/* || true
  # Every library they load but glibc's, the driver and the big CUDA libraries found on the machine.
  for bin in "$bundle"/bin/*; do
    ldd "$bin" | awk '/=> \// {print $3}'
  done | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*) ;;
      libcuda.so*|libcublas*|libnccl*|libnvidia*) ;;
      *) cp -L "$lib" "$bundle/lib/" ;;
    esac
  done
  strip --strip-unneeded "$bundle"/lib/* 2>/dev/null || true
  echo "resolved outside the bundle (must be only glibc, the driver, cuBLAS and NCCL):"
  for bin in "$bundle"/bin/*; do env -u LD_LIBRARY_PATH ldd "$bin"; done | awk '/=> / && $3 !~ /device-bundle/ {print "  " $1}' | sort -u
  {
    echo "glibc $(objdump -T "$bundle"/bin/* "$bundle"/lib/* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)"
    echo "cuda_architectures 90-real 90-virtual"
    echo "from the target: libcuda (driver for CUDA 13), libcublas/libcublasLt 13, libnccl 2"
  } > "$bundle/REQUIREMENTS"
  cat "$bundle/REQUIREMENTS"
  du -sh "$bundle"
  echo "prepared $bundle; on the device: validation/device-check.sh run (carry .device-bundle)"
}

run() {
  local out start
  start=$(date +%s)
  if [ -n "${OUT:-}" ]; then out="$OUT/results"; else out="validation/measured/$(date -u +%Y-%m-%d)"; fi
  mkdir -p "$out"
  local log="$out/device-check.log"
  exec > >(tee -a "$log") 2>&1
  echo "== dpsim device check $(date -u +%FT%TZ) on $(hostname), deadline ${DEADLINE_S} s"
  [ -f "$bundle/REQUIREMENTS" ] && cat "$bundle/REQUIREMENTS"
  nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version,clocks.sm,clocks.mem --format=csv || true

  # cuBLAS / cuBLASLt / NCCL from the machine's Python packages.
  local site libdirs=""
  site=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
  for d in $site; do
    [ -d "$d/nvidia" ] || continue
    libdirs+=$(find "$d/nvidia" \( -name 'libcublas*.so*' -o -name 'libnccl.so*' \) -printf '%h\n' | sort -u | tr '\n' ':')
  done
  export LD_LIBRARY_PATH="${libdirs}${LD_LIBRARY_PATH:-}"
  export DPSIM_DATA_DIR="$here"  # data/, topologies/, models/ of this checkout
  local dpsim="$here/$bundle/bin/dpsim" tests="$here/$bundle/bin/dpsim_gpu_tests"
  local measure="$here/$bundle/bin/dpsim-measure"  # what "$dpsim" measure runs

  # step NAME command...: runs it under its timeout, cut to what the deadline leaves; skipped when none is left.
  step() {
    local name=$1; shift
    local t left
    t=$(STEP_NAME=$name FIELD=2 step_field)
    left=$((DEADLINE_S - ($(date +%s) - start)))
    if [ "$left" -le 5 ]; then echo "== [$name] skipped: the deadline is reached"; return 124; fi
    [ "$t" -gt "$left" ] && t=$left
    echo "== [$name] (timeout ${t} s) $*"
    local rc
    if declare -F "$1" >/dev/null; then  # a function of this script: `timeout` runs programs only
      "$@"
      rc=$?
    else
      timeout "$t" "$@"
      rc=$?
    fi
    echo "== [$name] exit code $rc after $(($(date +%s) - start)) s"
    return $rc
  }
  watchdog() { STEP_NAME=$1 FIELD=3 step_field; }

  libraries() {
    local bad=0
    for bin in "$dpsim" "$measure" "$tests"; do
      if ldd "$bin" | grep 'not found'; then bad=1; fi
    done
    if command -v cuobjdump >/dev/null; then cuobjdump --list-elf "$measure" | sed 's/^/  /'; else
      echo "  (no cuobjdump here; the architectures as dpsim measure reports them follow in its log)"; fi
    timeout 10 "$dpsim" --version || bad=1
    return $bad
  }
  # PyTorch's own Llama block, kernel by kernel (needs no bundle): the ground truth for the compute model.
  torch_probe() {
    step torch-probe env PYTHONUNBUFFERED=1 python3 validation/device/torch-llama-probe.py --out "$out"
  }
  step libraries libraries || { echo "!! the bundle does not load here: only the PyTorch probe runs"; torch_probe; return 1; }

  step gpu-tests "$tests" --durations yes > >(tee "$out/gpu-tests.txt")

  step measure-llama3.1-8b-1xh200 "$dpsim" measure validation/device/llama3.1-8b-1xh200-seq2048.yaml --json \
    -o "$out/measure-llama3.1-8b-1xh200-seq2048.json" --warmup 2 --iters 5 \
    --watchdog "$(watchdog measure-llama3.1-8b-1xh200)"

  # Must be refused for memory, before allocating: exit 1 with the "needs ... GB" message.
  local refusal
  refusal=$(step refuse-llama3.1-70b-1xh200 "$dpsim" measure validation/device/llama3.1-70b-1xh200.yaml \
    --watchdog "$(watchdog refuse-llama3.1-70b-1xh200)" 2>&1)
  echo "$refusal"
  if grep -q "needs .* GB per GPU" <<<"$refusal"; then echo "refusal: as expected"; else echo "!! refusal: NOT refused"; fi

  step calibrate "$dpsim" measure validation/device/llama3.1-8b-1xh200-seq2048.yaml --calibrate \
    --calibration-out "$out/calibration-H200.yaml" --watchdog "$(watchdog calibrate)"

  step measure-gpt2-124m "$dpsim" measure scenarios/gpt2-124m-4xrtx4090.yaml --gpus 1 --json \
    -o "$out/measure-gpt2-124m.json" --watchdog "$(watchdog measure-gpt2-124m)"

  # A sharded step on one GPU: the CUDA executor's FSDP shards and unit buffers (no collective on one rank).
  step measure-gpt2-124m-zero3-1xh200 "$dpsim" measure validation/device/gpt2-124m-zero3-1xh200.yaml --json \
    -o "$out/measure-gpt2-124m-zero3-1xh200.json" --watchdog "$(watchdog measure-gpt2-124m-zero3-1xh200)"

  torch_probe
  nvidia-smi --query-gpu=name,memory.used,clocks.sm --format=csv || true
  echo "== done $(date -u +%FT%TZ) after $(($(date +%s) - start)) s; results in $out:"; ls -la "$out"
}

case "${1:-}" in
  prepare) prepare ;;
  run) run ;;
  budget) budget ;;
  *) echo "usage: $0 prepare|run|budget" >&2; exit 2 ;;
esac
