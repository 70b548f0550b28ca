#!/usr/bin/env bash
# CLI tests: run the built binary on shipped files and check what a user sees.
# usage: run_cli_tests.sh DPSIM SOURCE_DIR
set -u
dpsim=$1
src=$2
fail=0
pass=0
check() {  # check NAME EXPECTED_STATUS PATTERN -- command...
  local name=$1 want=$2 pattern=$3
  shift 4
  local out status
  out=$("$@" 2>&1)
  status=$?
  if [[ $status -ne $want ]] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: status $status (want $want), pattern '$pattern'"
    echo "$out" | head -20
    fail=$((fail + 1))
  else
    pass=$((pass + 1))
  fi
}
s=$src/scenarios
check estimate-table 0 "parameters +8,030,261,248" -- "$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml"
check estimate-nofit 0 "NO: short by" -- "$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml"
check estimate-json 0 '"parameters": 8030261248' -- "$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml" --json
check estimate-pcie 0 "ideal ring at 32.0 GB/s +878" -- "$dpsim" estimate "$s/llama3.1-8b-8xpcie4.yaml"
check inspect 0 "total +8,030,261,248" -- "$dpsim" inspect model "$src/models/llama-3.1-8b.yaml"
# inspect topology: the nccl-tests-like table (NVLS from 2 MiB on 8 H200, the A100 ring plateau near its measured
# 232.5 GB/s), a resized multi-node cluster, and a size the topology cannot have.
check inspect-topology-nvls 0 "^2MiB +2097152 +nvls/simple" -- "$dpsim" inspect topology h200-8x-nvswitch --min-bytes 1MiB --max-bytes 4MiB
check inspect-topology-a100 0 "^8GiB .*ring/simple .* 23[0-4]\.[0-9]{2}$" -- "$dpsim" inspect topology a100-8x-nvswitch --min-bytes 8GiB --max-bytes 8GiB
check inspect-topology-nodes 0 "4 nodes x 8 = 32" -- "$dpsim" inspect topology h100-ib-rail --nodes 4 --min-bytes 1GiB --max-bytes 1GiB
check inspect-topology-json 0 '"busbw_GBps"' -- "$dpsim" inspect topology pcie4-8x --gpus-per-node 4 --json
check inspect-topology-too-many 2 "GPU 8 is behind 0 PCIe switches" -- "$dpsim" inspect topology pcie4-8x --gpus-per-node 12
check inspect-topology-unknown 2 'no topology named "h900" \(shipped: a100-4xhdr-cluster' -- "$dpsim" inspect topology h900
check inspect-topology-bad-size 2 "--min-bytes: \"lots\" is not a message size" -- "$dpsim" inspect topology pcie4-8x --min-bytes lots
check help 0 "estimate" -- "$dpsim" --help
check estimate-help 0 "--json" -- "$dpsim" estimate --help
check bad-input-exit-2 2 "training.micro_bach: unknown key" -- "$dpsim" estimate "$src/tests/bad-inputs/unknown-key.yaml"
check missing-file 2 "no such file" -- "$dpsim" estimate /nonexistent.yaml
check bad-option 2 "" -- "$dpsim" estimate --no-such-option
# No partial output on error: -o must not create the file.
tmp=$(mktemp -d)
"$dpsim" estimate "$src/tests/bad-inputs/unknown-key.yaml" -o "$tmp/out.json" >/dev/null 2>&1
if [[ -e $tmp/out.json ]]; then echo "FAIL no-partial-output"; fail=$((fail + 1)); else pass=$((pass + 1)); fi
check unwritable-output 1 "cannot write" -- "$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml" -o /nonexistent-dir/x.json
"$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml" --json -o "$tmp/a.json" && "$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml" --json -o "$tmp/b.json"
if cmp -s "$tmp/a.json" "$tmp/b.json"; then pass=$((pass + 1)); else echo "FAIL deterministic"; fail=$((fail + 1)); fi
# Output paths that cannot be written (tests run as root in CI, so no chmod: a directory, and /proc where
# nobody may create files): exit 1 naming the path, and no temporary file left beside it.
mkdir "$tmp/outdir"
check output-is-directory 1 "cannot write $tmp/outdir" -- "$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml" -o "$tmp/outdir"
if ls -A "$tmp" | grep -q '\.tmp\.'; then echo "FAIL no-temp-left"; fail=$((fail + 1)); else pass=$((pass + 1)); fi
check output-in-proc 1 "cannot write /proc/version" -- "$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml" -o /proc/version
# An unreadable scenario (as root, chmod 000 does not stop reads: run as nobody where we can).
cp "$s/llama3.1-8b-8xh100.yaml" "$tmp/unreadable.yaml"
chmod 000 "$tmp/unreadable.yaml"
chmod 755 "$tmp"
if [[ $(id -u) -ne 0 ]]; then
  check unreadable-input 2 "unreadable.yaml: cannot be read" -- "$dpsim" estimate "$tmp/unreadable.yaml"
elif command -v setpriv >/dev/null && setpriv --reuid=65534 --regid=65534 --clear-groups "$dpsim" --help >/dev/null 2>&1; then
  check unreadable-input 2 "unreadable.yaml: cannot be read" -- setpriv --reuid=65534 --regid=65534 --clear-groups \
    "$dpsim" estimate "$tmp/unreadable.yaml"
else
  echo "skip unreadable-input: running as root and nobody cannot run $dpsim"
fi
rm -rf "$tmp"
# Calibration loop: fit from an nccl-tests log, then predict with it; the context names the calibration.
ctmp=$(mktemp -d)
check calibrate 0 "wrote" -- "$dpsim" calibrate "$src/tests/backend/data/all_reduce_perf_gb10_2rank.log" --fabric pcie --name gb10 -o "$ctmp/c.yaml"
check predict-calibrated 0 "calibration gb10 fnv1a64:" -- "$dpsim" predict "$s/gpt2-124m-4xrtx4090.yaml" --calibration "$ctmp/c.yaml" --json --no-advice
check predict-bad-calibration 2 'gpt2-124m-4xrtx4090.yaml:6: model: unknown key "model"' -- "$dpsim" predict "$s/gpt2-124m-4xrtx4090.yaml" --calibration "$s/gpt2-124m-4xrtx4090.yaml"
rm -rf "$ctmp"
# --trace names the GPUs it holds (text output) and the trace names each bucket's size as the --buckets table does.
ttmp=$(mktemp -d)
"$dpsim" predict "$s/gpt2-1.5b-16xh100-ib.yaml" --no-advice --buckets --trace "$ttmp/t.json" --trace-ranks 4 -o "$ttmp/table.txt"
check predict-trace-ranks 0 "^Trace $ttmp/t.json: GPUs 0, 5, 10, 15 of 16 \(the first, the last" -- cat "$ttmp/table.txt"
check predict-trace-ranks-json 0 "^Trace .*: all 8 GPUs" -- "$dpsim" predict "$s/llama3.1-8b-8xh100.yaml" --no-advice --json --trace "$ttmp/t8.json"
size=$(grep -m1 -oE "^ *0 +[0-9.]+ [kMGT]?B" "$ttmp/table.txt" | sed -E 's/^ *0 +//')
if [[ -n $size ]] && grep -q "all-reduce b0 $size " "$ttmp/t.json" && grep -q '"traced_gpus":\[0,5,10,15\]' "$ttmp/t.json"; then
  pass=$((pass + 1))
else
  echo "FAIL trace-bucket-size: table says '$size' for bucket 0; trace: $(grep -oE 'all-reduce b0 [^"]*' "$ttmp/t.json" | head -1)"
  fail=$((fail + 1))
fi
rm -rf "$ttmp"
echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
