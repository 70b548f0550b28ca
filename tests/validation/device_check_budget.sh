#!/usr/bin/env bash
# validation/device-check.sh's own time budget: its step timeouts add up to no more than its overall deadline,
# the deadline fits the device tool's 600 s per command, and every --watchdog is shorter than its step's timeout
# (so that a hung collective is named by the watchdog, not cut off by `timeout`).
set -u
script=${1:?usage: device_check_budget.sh validation/device-check.sh}
table=$("$script" budget) || { echo "FAIL: $script budget exited $?"; exit 1; }
deadline=$(awk '$1 == "deadline_s" {print $2}' <<<"$table")
sum=$(awk '$1 == "step" {s += $3} END {print s + 0}' <<<"$table")
steps=$(awk '$1 == "step" {n++} END {print n + 0}' <<<"$table")
fail=0
[ -n "$deadline" ] || { echo "FAIL: no deadline_s"; exit 1; }
[ "$steps" -ge 5 ] || { echo "FAIL: only $steps steps listed"; fail=1; }
[ "$sum" -le "$deadline" ] || { echo "FAIL: step timeouts sum to $sum s, over the deadline $deadline s"; fail=1; }
[ "$deadline" -le 600 ] || { echo "FAIL: deadline $deadline s is over the device tool's 600 s"; fail=1; }
while read -r _ name timeout watchdog; do
  if [ "$watchdog" -gt 0 ] && [ "$watchdog" -ge "$timeout" ]; then
    echo "FAIL: step $name: --watchdog $watchdog s is not shorter than its timeout $timeout s"; fail=1
  fi
done < <(awk '$1 == "step"' <<<"$table")
# Every step the run uses is in the table (a step missing from it would fail at run time).
for name in $(grep -oE '^ *(refusal=\$\()?step [a-z0-9.-]+ ' "$script" | sed 's/.*step /step /' | awk '{print $2}' | sort -u); do
  grep -q "^step $name " <<<"$table" || { echo "FAIL: run uses step '$name', which the table lacks"; fail=1; }
done
[ "$fail" = 0 ] && echo "ok: $steps steps, timeouts $sum s <= deadline $deadline s <= 600 s; watchdogs inside their steps"
exit $fail
