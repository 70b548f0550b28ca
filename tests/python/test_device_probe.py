#!/usr/bin/env python3
"""validation/device/torch-llama-probe.py, the device check's PyTorch probe, at --tiny sizes on the CPU: it runs,
and its JSON holds every part the compute model is compared with (docs/backend.md). Exit 77 without torch.

Usage: test_device_probe.py SOURCE_DIR"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import torch  # noqa: F401
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

probe = os.path.join(sys.argv[1], "validation", "device", "torch-llama-probe.py")
with tempfile.TemporaryDirectory() as out:
    run = subprocess.run([sys.executable, probe, "--tiny", "--out", out], capture_output=True, text=True, timeout=300)
    if run.returncode != 0:
        sys.exit(f"probe exited {run.returncode}: {run.stderr[-2000:]}")
    res = json.load(open(os.path.join(out, "torch-llama-probe.json")))
failed = [k for k in ("launch", "copy", "gemm", "sdpa", "adamw", "blocks", "mpt_blocks")
          if isinstance(res.get(k), dict) and "error" in res[k] or k not in res]
if failed:
    sys.exit(f"parts that failed: {failed}: {[res.get(k) for k in failed]}")
assert len(res["gemm"]) == 21, res["gemm"]  # 7 linear layers x forward, input gradient, weight gradient
for part in ("blocks", "mpt_blocks"):
    b = res[part]
    assert 0 < b["forward_s_per_block"] and 0 < b["forward_backward_s_per_block"], b
assert res["adamw"]["foreach"]["s"] > 0, res["adamw"]
assert res["launch"]["add_us_per_call"] > 0 and res["launch"]["linear_us_per_call"] > 0, res["launch"]
print("ok: the probe's parts ran at --tiny sizes")
