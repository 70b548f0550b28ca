#!/usr/bin/env bash
# An interrupted sweep (SIGINT) keeps every finished point, exits non-zero, and --resume completes it.
set -u
dpsim=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/s.yaml" <<EOS
base: $src/scenarios/llama3.1-8b-16384xh100-ib.yaml
axes:
  ddp.bucket_cap: [2MiB, 4MiB, 8MiB, 16MiB, 25MiB, 50MiB, 100MiB, 200MiB]
  cluster.nodes: [1024, 2048, 4096]
EOS
"$dpsim" sweep "$tmp/s.yaml" -o "$tmp/out" -j 2 -q &
pid=$!
# Interrupt once a first point is recorded (not after a fixed time: on a loaded machine none may have finished yet).
for ((i = 0; i < 1200; ++i)); do
  [[ -s $tmp/out/results.jsonl ]] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
kill -INT $pid
wait $pid
status=$?
fail=0
if [[ $status -eq 0 ]]; then echo "FAIL: an interrupted sweep exited 0"; fail=1; fi
lines=$(wc -l <"$tmp/out/results.jsonl" 2>/dev/null || echo 0)
echo "interrupted after $lines points (status $status)"
python3 - "$tmp/out/results.jsonl" <<'EOP' || fail=1
import json, sys
for line in open(sys.argv[1]):
    json.loads(line)  # every kept line is whole
EOP
"$dpsim" sweep "$tmp/s.yaml" -o "$tmp/out" -j 2 -q --resume || fail=1
rows=$(($(wc -l <"$tmp/out/results.csv") - 1))
if [[ $rows -ne 24 ]]; then echo "FAIL: $rows rows after resume, want 24"; fail=1; fi
[[ -d $tmp/out/.partial ]] && { echo "FAIL: partial directory left behind"; fail=1; }
if [[ $fail -eq 0 ]]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi
exit $fail
