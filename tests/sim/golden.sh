#!/bin/sh
# Golden predictions: `dpsim predict SCENARIO --json` for every shipped scenario must match
# tests/golden/<scenario>.json: the same keys and strings, every number within 1e-9 relative (json_close.py;
# predictions are deterministic, the tolerance only allows a refactoring to sum the same times in another order).
#   golden.sh DPSIM SOURCE_DIR            compare
#   golden.sh DPSIM SOURCE_DIR --update   regenerate after an intended model change (review the diff)
set -u
dpsim=$1
src=$2
update=${3:-}
golden=$src/tests/golden
mkdir -p "$golden"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for scenario in "$src"/scenarios/*.yaml; do
  name=$(basename "$scenario" .yaml)
  if ! "$dpsim" predict "$scenario" --json -o "$tmp/$name.json" 2>"$tmp/$name.err"; then
    echo "FAIL $name: dpsim predict failed: $(cat "$tmp/$name.err")"
    status=1
    continue
  fi
  if [ "$update" = "--update" ]; then
    cp "$tmp/$name.json" "$golden/$name.json"
    echo "updated $name"
  elif [ ! -f "$golden/$name.json" ]; then
    echo "FAIL $name: no golden file (run: $0 $dpsim $src --update)"
    status=1
  elif ! python3 "$src/tests/sim/json_close.py" "$golden/$name.json" "$tmp/$name.json" --rel 1e-9 >"$tmp/$name.diff"; then
    echo "FAIL $name: prediction changed:"
    head -40 "$tmp/$name.diff"
    status=1
  else
    echo "ok   $name"
  fi
done
exit $status
