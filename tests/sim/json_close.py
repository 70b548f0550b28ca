#!/usr/bin/env python3
"""Compare two result JSON files: same keys, same strings and booleans, numbers within a relative tolerance.

usage: json_close.py EXPECTED ACTUAL [--rel 1e-9]
Prints each difference as its key path and exits 1 when there is one (0 when the files agree).
"""
import json
import math
import sys


def diffs(a, b, path, rel):
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        if type(a) is not type(b):
            yield f"{path}: {a!r} != {b!r}"
            return
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                yield f"{path}.{k}: only in {'expected' if k in a else 'actual'}"
            else:
                yield from diffs(a[k], b[k], f"{path}.{k}", rel)
    elif isinstance(a, list):
        if len(a) != len(b):
            yield f"{path}: {len(a)} entries != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            yield from diffs(x, y, f"{path}[{i}]", rel)
    elif isinstance(a, (int, float)) and not isinstance(a, bool):
        if not math.isclose(a, b, rel_tol=rel, abs_tol=1e-300):
            yield f"{path}: {a!r} != {b!r} (relative {abs(a - b) / max(abs(a), abs(b)):.3g} > {rel:g})"
    elif a != b:
        yield f"{path}: {a!r} != {b!r}"


def main(argv):
    rel = 1e-9
    if "--rel" in argv:
        i = argv.index("--rel")
        rel = float(argv[i + 1])
        del argv[i:i + 2]
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        expected = json.load(f)
    with open(argv[2]) as f:
        actual = json.load(f)
    found = list(diffs(expected, actual, "", rel))
    for line in found[:40]:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
