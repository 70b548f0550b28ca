#!/usr/bin/env bash
# A sweep never loses or corrupts a point: Ctrl-C and SIGTERM to the process group leave the point in flight
# unrecorded for --resume; a full disk stops the sweep without recording a point; a torn last line is dropped
# on resume; a second sweep into the same directory is refused; --resume refuses rows of another sweep or of
# changed inputs; a point that hangs is killed at --point-timeout and recorded as its error, and the points after it
# run on a new worker; bad options exit 2.
# A point hangs by reading its model from a FIFO nobody writes.
set -u
dpsim=$1
src=$2
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -KILL -- -"$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
set -m # every background job in its own process group, as a terminal runs it
fail=0
passed=0
ok() { passed=$((passed + 1)); }
bad() {
  echo "FAIL: $*"
  fail=$((fail + 1))
}
sed "s|^model: .*|model: $src/models/gpt2-1.5b.yaml|" "$src/scenarios/gpt2-1.5b-16xh100-ib.yaml" >"$tmp/base.yaml"
write_sweep() { # FILE MODEL_VALUES...
  local f=$1
  shift
  {
    echo "base: $tmp/base.yaml"
    echo "command: estimate"
    echo "axes:"
    echo "  model: [$(
      IFS=,
      echo "$*"
    )]"
  } >"$f"
}
good=$src/models/gpt2-1.5b.yaml
rows() { if [[ -f $1 ]]; then wc -l <"$1"; else echo 0; fi; }
wait_rows() { # FILE N: until FILE has N lines (at most 60 s)
  for ((i = 0; i < 600; ++i)); do
    [[ $(rows "$1") -ge $2 ]] && return 0
    sleep 0.1
  done
  return 1
}

# 1. SIGINT and SIGTERM to the process group while a point runs: that point is not recorded, --resume runs it.
for sig in INT TERM; do
  d=$tmp/sig-$sig
  mkdir -p "$d"
  mkfifo "$d/hang.yaml"
  write_sweep "$d/s.yaml" "$good" "$d/hang.yaml"
  "$dpsim" sweep "$d/s.yaml" -o "$d/out" -j 2 -q 2>"$d/err" &
  pid=$!
  pids+=("$pid")
  wait_rows "$d/out/results.jsonl" 1 || bad "$sig: the good point was never recorded"
  sleep 0.3
  kill -"$sig" -- -"$pid"
  wait "$pid"
  status=$?
  [[ $status -ne 0 ]] || bad "$sig: an interrupted sweep exited 0"
  if grep -q '"point":1' "$d/out/results.jsonl"; then bad "$sig: the interrupted point was recorded: $(cat "$d/out/results.jsonl")"; fi
  rm "$d/hang.yaml" && cp "$good" "$d/hang.yaml"
  "$dpsim" sweep "$d/s.yaml" -o "$d/out" -q --resume 2>"$d/err2" || bad "$sig: resume failed: $(cat "$d/err2")"
  grep -q "1 run now (0 failed), 1 already done" "$d/err2" || bad "$sig: resume did not rerun the point: $(cat "$d/err2")"
  [[ $(grep -c '"result"' "$d/out/results.jsonl") -eq 2 ]] || bad "$sig: want 2 results after resume"
  [[ $fail -eq 0 ]] && ok
done

# 2. A full disk (here: a file size limit, writes fail with EFBIG) stops the sweep; nothing is recorded as a
# point's error, and --resume completes the sweep.
d=$tmp/full
mkdir -p "$d"
write_sweep "$d/s.yaml" "$good" "$good"
(
  trap '' XFSZ
  ulimit -f 1
  exec "$dpsim" sweep "$d/s.yaml" -o "$d/out" -j 1 -q
) 2>"$d/err"
status=$?
f0=$fail
[[ $status -eq 1 ]] || bad "disk full: exit $status, want 1: $(cat "$d/err")"
grep -q "rerun with --resume" "$d/err" || bad "disk full: no advice to resume: $(cat "$d/err")"
if grep -q '"error"' "$d/out/results.jsonl" 2>/dev/null; then bad "disk full recorded as a point's error"; fi
"$dpsim" sweep "$d/s.yaml" -o "$d/out" -q --resume 2>"$d/err2" || bad "disk full: resume failed: $(cat "$d/err2")"
[[ $(grep -c '"result"' "$d/out/results.jsonl") -eq 2 ]] || bad "disk full: want 2 results after resume"
[[ $fail -eq $f0 ]] && ok

# 3. A torn last line (a kill mid-append) is dropped on resume and its point rerun; a corrupted row is refused.
d=$tmp/torn
mkdir -p "$d"
write_sweep "$d/s.yaml" "$good" "$good" "$good"
f0=$fail
"$dpsim" sweep "$d/s.yaml" -o "$d/out" -q 2>/dev/null || bad "torn: first run failed"
cp "$d/out/results.jsonl" "$d/full.jsonl"
{ head -n 2 "$d/full.jsonl"; tail -n 1 "$d/full.jsonl" | head -c 40; } >"$d/out/results.jsonl"
"$dpsim" sweep "$d/s.yaml" -o "$d/out" -q --resume 2>"$d/err" || bad "torn: resume failed: $(cat "$d/err")"
cmp -s "$d/out/results.jsonl" "$d/full.jsonl" || bad "torn: resume did not restore the torn row"
[[ $(($(wc -l <"$d/out/results.csv") - 1)) -eq 3 ]] || bad "torn: want 3 CSV rows"
{ head -n 1 "$d/full.jsonl"; echo '{"point": 1, garbage'; tail -n 1 "$d/full.jsonl"; } >"$d/out/results.jsonl"
"$dpsim" sweep "$d/s.yaml" -o "$d/out" -q --resume 2>"$d/err"
status=$?
[[ $status -eq 2 ]] || bad "torn: a corrupted middle row: exit $status, want 2"
grep -q "results.jsonl:2: not a result row" "$d/err" || bad "torn: message: $(cat "$d/err")"
[[ $fail -eq $f0 ]] && ok

# 4. A second sweep into a directory another sweep is writing is refused; the first is unharmed.
d=$tmp/lock
mkdir -p "$d"
mkfifo "$d/hang.yaml"
write_sweep "$d/s.yaml" "$good" "$d/hang.yaml"
f0=$fail
"$dpsim" sweep "$d/s.yaml" -o "$d/out" -j 2 -q 2>/dev/null &
pid=$!
pids+=("$pid")
wait_rows "$d/out/results.jsonl" 1 || bad "lock: the first sweep recorded nothing"
"$dpsim" sweep "$d/s.yaml" -o "$d/out" -q 2>"$d/err"
status=$?
[[ $status -eq 1 ]] || bad "lock: a second writer: exit $status, want 1"
grep -q "is in use: another dpsim sweep is writing into it" "$d/err" || bad "lock: message: $(cat "$d/err")"
[[ $(rows "$d/out/results.jsonl") -eq 1 ]] || bad "lock: the second sweep touched the first one's rows"
kill -INT -- -"$pid"
wait "$pid"
[[ $fail -eq $f0 ]] && ok

# 5. --resume refuses rows recorded by another sweep, rows outside the sweep, and rows of changed inputs.
d=$tmp/identity
mkdir -p "$d"
f0=$fail
write_sweep "$d/s.yaml" "$good" "$good"
"$dpsim" sweep "$d/s.yaml" -o "$d/out" -q 2>/dev/null || bad "identity: first run failed"
cat >"$d/other.yaml" <<EOS
base: $tmp/base.yaml
command: estimate
axes:
  cluster.nodes: [1, 2]
EOS
expect_refusal() { # NAME PATTERN ARGS...
  local name=$1 pattern=$2
  shift 2
  "$dpsim" sweep "$@" -o "$d/out" -q --resume 2>"$d/err"
  local status=$?
  [[ $status -eq 2 ]] || bad "identity: $name: exit $status, want 2: $(cat "$d/err")"
  grep -q -- "$pattern" "$d/err" || bad "identity: $name: message: $(cat "$d/err")"
}
expect_refusal "another sweep" "point 0 was recorded by another sweep: cluster.nodes was (none), the sweep now gives 1" "$d/other.yaml"
cp "$d/out/results.jsonl" "$d/keep.jsonl"
sed 's/"point":1,/"point":7,/' "$d/keep.jsonl" >"$d/out/results.jsonl"
expect_refusal "outside" "it holds point 7, outside this sweep (points 0 to 1)" "$d/s.yaml"
cp "$d/keep.jsonl" "$d/out/results.jsonl"
echo "# edited" >>"$tmp/base.yaml"
expect_refusal "edited base" "these inputs changed since its points were recorded: $tmp/base.yaml" "$d/s.yaml"
sed -i '$d' "$tmp/base.yaml"
echo "# edited" >>"$d/s.yaml"
expect_refusal "edited sweep" "these inputs changed since its points were recorded: $d/s.yaml" "$d/s.yaml"
sed -i '$d' "$d/s.yaml"
"$dpsim" sweep "$d/s.yaml" -o "$d/out" -q --resume 2>"$d/err" || bad "identity: unchanged inputs refused: $(cat "$d/err")"
[[ $fail -eq $f0 ]] && ok

# 6. A point that hangs is killed at --point-timeout and recorded as its error; the sweep completes.
d=$tmp/timeout
mkdir -p "$d"
mkfifo "$d/hang.yaml"
write_sweep "$d/s.yaml" "$good" "$d/hang.yaml"
f0=$fail
timeout 60 "$dpsim" sweep "$d/s.yaml" -o "$d/out" -q --point-timeout 1 2>"$d/err"
status=$?
[[ $status -eq 0 ]] || bad "timeout: exit $status: $(cat "$d/err")"
grep -q '1,model,.*error,the point ran longer than 1 s (--point-timeout)' "$d/out/results.csv" ||
  grep -q '^1,.*,error,the point ran longer than 1 s (--point-timeout)' "$d/out/results.csv" ||
  bad "timeout: row: $(cat "$d/out/results.csv")"
grep -q "2 run now (1 failed)" "$d/err" || bad "timeout: summary: $(cat "$d/err")"
# One worker (-j 1) runs the points one after another: the one killed at its timeout is replaced, and the points
# after the hung one still run, each recorded once.
write_sweep "$d/s3.yaml" "$good" "$d/hang.yaml" "$good" "$good"
timeout 60 "$dpsim" sweep "$d/s3.yaml" -o "$d/out3" -j 1 -q --point-timeout 1 2>"$d/err3"
status=$?
[[ $status -eq 0 ]] || bad "timeout, one worker: exit $status: $(cat "$d/err3")"
grep -q "4 run now (1 failed)" "$d/err3" || bad "timeout, one worker: summary: $(cat "$d/err3")"
[[ $(grep -c '"result"' "$d/out3/results.jsonl") -eq 3 && $(wc -l <"$d/out3/results.jsonl") -eq 4 ]] ||
  bad "timeout, one worker: rows: $(cut -c1-80 "$d/out3/results.jsonl")"
grep -q '^1,.*,error,the point ran longer than 1 s (--point-timeout)' "$d/out3/results.csv" ||
  bad "timeout, one worker: row: $(cat "$d/out3/results.csv")"
# The base scenario's model a FIFO: the sweep's parent, which parses the base scenario's files before forking,
# does not block on it; the point does, and is killed at its timeout.
sed "s|^model: .*|model: $d/hang.yaml|" "$tmp/base.yaml" >"$d/hang-base.yaml"
printf 'base: %s\ncommand: estimate\naxes:\n  ddp.bucket_cap: [25MiB]\n' "$d/hang-base.yaml" >"$d/s2.yaml"
timeout 60 "$dpsim" sweep "$d/s2.yaml" -o "$d/out2" -q --point-timeout 1 2>"$d/err2"
status=$?
[[ $status -eq 0 ]] || bad "timeout, base: exit $status: $(cat "$d/err2")"
grep -q '^0,25MiB,error,the point ran longer than 1 s (--point-timeout)' "$d/out2/results.csv" ||
  bad "timeout, base: row: $(cat "$d/out2/results.csv" 2>/dev/null)"
[[ $fail -eq $f0 ]] && ok

# 7. Options that make no sense are refused (exit 2), never replaced by a default.
f0=$fail
for args in "-j 0" "-j -1" "--limit -5" "--shard 1/3x" "--shard 1/x3" "--point-timeout 0" "--point-timeout nan" "-o ''"; do
  eval "\"$dpsim\" sweep \"$d/s.yaml\" -q $args" >/dev/null 2>"$tmp/opt.err"
  status=$?
  [[ $status -eq 2 ]] || bad "option $args: exit $status, want 2: $(cat "$tmp/opt.err")"
done
[[ $fail -eq $f0 ]] && ok

echo "$passed passed, $fail failed"
[[ $fail -eq 0 ]]
