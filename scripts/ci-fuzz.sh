#!/usr/bin/env bash
# CI: build the libFuzzer targets (clang, ASan + UBSan) into build-fuzz/ and fuzz each for a share of a
# bounded budget over the seed corpus (scenarios/ with its sweeps, topologies/, models/, data/, tests/bad-inputs/;
# the nccl-tests logs under tests/ for the log reader).
# Any crash, hang (-timeout), out-of-memory, sanitizer report or escaping exception fails the job; the
# reproducer is left under build-fuzz/findings/ (fix it, then add it to tests/bad-inputs/).
# usage: scripts/ci-fuzz.sh [TOTAL_SECONDS]   (default $DPSIM_FUZZ_SECONDS or 60, split across the targets)
set -euo pipefail
cd "$(dirname "$0")/.."
budget=${1:-${DPSIM_FUZZ_SECONDS:-60}}
targets=(fuzz_scenario fuzz_topology fuzz_model fuzz_units fuzz_sweep fuzz_nccl_log)
jobs=$(nproc)
((jobs > ${#targets[@]})) && jobs=${#targets[@]}
# The budget is wall-clock: with J cores, J targets run at once, each for budget * J / targets seconds.
per_target=$((budget * jobs / ${#targets[@]}))
((per_target < 1)) && per_target=1

CXX=${CXX_FUZZ:-clang++} cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDPSIM_FUZZ=ON \
  -DDPSIM_CUDA=OFF -DDPSIM_PYTHON=OFF -DDPSIM_BUILD_TESTS=OFF -DDPSIM_WERROR=ON -DCMAKE_UNITY_BUILD=ON >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]}"

work=build-fuzz/run
rm -rf "$work" build-fuzz/findings
mkdir -p "$work" build-fuzz/findings
seed_yaml=$work/seed-yaml
mkdir -p "$seed_yaml"
find scenarios topologies models data tests/bad-inputs -type f \( -name '*.yaml' -o -name '*.json' \) -print0 |
  while IFS= read -r -d '' f; do cp "$f" "$seed_yaml/$(echo "$f" | tr '/' '_')"; done
seed_logs=$work/seed-logs
mkdir -p "$seed_logs"
find tests -type f -name '*.log' -print0 |
  while IFS= read -r -d '' f; do cp "$f" "$seed_logs/$(echo "$f" | tr '/' '_')"; done
seed_units=$work/seed-units
mkdir -p "$seed_units"
i=0
grep -rhoE '[-0-9][0-9.]*(e[-+]?[0-9]+)? ?([KMGTP]i?)?(B|b|FLOPS|f)(ps|/s)?|[0-9][0-9.]* ?[mun]?s\b' \
  scenarios topologies data tests/bad-inputs | sort -u | while IFS= read -r v; do
  printf '%s' "$v" >"$seed_units/$i"
  i=$((i + 1))
done

run_one() {  # run_one TARGET: fuzz into a fresh corpus dir seeded from the shared seeds
  local t=$1 seeds=$seed_yaml dict=fuzz/yaml.dict
  [[ $t == fuzz_units ]] && seeds=$seed_units dict=fuzz/units.dict
  [[ $t == fuzz_nccl_log ]] && seeds=$seed_logs dict=fuzz/nccl_log.dict
  mkdir -p "$work/corpus-$t"
  "build-fuzz/fuzz/$t" "$work/corpus-$t" "$seeds" -dict="$dict" -max_total_time="$per_target" -timeout=10 \
    -rss_limit_mb=2048 -max_len=16384 -print_final_stats=1 -artifact_prefix="build-fuzz/findings/$t-" \
    </dev/null >"$work/$t.log" 2>&1
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
echo "fuzzing ${#targets[@]} targets, $jobs at a time, ${per_target}s each"
declare -A status
pids=()
names=()
for t in "${targets[@]}"; do
  run_one "$t" &
  pids+=($!)
  names+=("$t")
  if ((${#pids[@]} >= jobs)); then
    for k in "${!pids[@]}"; do
      rc=0
      wait "${pids[$k]}" || rc=$?
      status[${names[$k]}]=$rc
    done
    pids=()
    names=()
  fi
done
for k in "${!pids[@]}"; do
  rc=0
  wait "${pids[$k]}" || rc=$?
  status[${names[$k]}]=$rc
done

failed=0
for t in "${targets[@]}"; do
  stats=$(grep -E '^stat::(number_of_executed_units|new_units_added)' "$work/$t.log" | awk '{printf "%s ", $2}')
  if [[ ${status[$t]} -ne 0 ]]; then
    echo "FAIL $t (exit ${status[$t]}); log: $work/$t.log"
    grep -E 'ERROR|SUMMARY|terminate|what\(\)|Test unit written|runtime error' "$work/$t.log" | head -20
    failed=1
  else
    echo "ok   $t: executions, new units: $stats"
  fi
done
if ((failed)); then
  echo "reproducers:"
  ls -l build-fuzz/findings/
  exit 1
fi
