"""import dpsim (the pybind11 module in the build tree) against the dpsim command, in one process:
  - estimate and predict return the dict `--json` prints, overrides as --set gives them;
  - load from a dict; a bad input raises dpsim.InputError carrying file, line and key path;
  - sweep: one row per point in dpsim sweep's order;
  - examples/sweep_gpus.py writes its PNG.
Usage: test_module.py DPSIM SOURCE_DIR BUILD_PYTHON_DIR"""
import json
import os
import subprocess
import sys
import tempfile

dpsim_cli, src, build_python = (os.path.abspath(a) for a in sys.argv[1:4])
sys.path.insert(0, build_python)
import dpsim  # noqa: E402

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def cli(*args):
    return json.loads(subprocess.run([dpsim_cli, *args, "--json"], check=True, capture_output=True, text=True).stdout)


scenario = os.path.join(src, "scenarios", "resnet50-8xv100.yaml")
ib = os.path.join(src, "scenarios", "gpt2-1.5b-16xh100-ib.yaml")
check(dpsim.estimate(scenario) == cli("estimate", scenario), "estimate = dpsim estimate --json")
s = dpsim.load(ib, overrides={"cluster.nodes": 4})
check(dpsim.estimate(s) == cli("estimate", ib, "--set", "cluster.nodes=4"), "load(overrides) + estimate = --set")
check(dpsim.predict(scenario, fidelity="fast") == cli("predict", scenario, "--fidelity", "fast", "--no-advice"),
      "predict(fidelity=fast) = dpsim predict --json --no-advice")

with open(scenario) as f:
    text = f.read().replace("../models/", os.path.join(src, "models") + "/")
with tempfile.TemporaryDirectory() as tmp:
    as_file = os.path.join(tmp, "s.yaml")
    with open(as_file, "w") as f:
        f.write(text)
    import yaml

    from_dict = dpsim.estimate(dpsim.load(yaml.safe_load(text)))
    check(from_dict["step"] == dpsim.estimate(as_file)["step"], "load(dict) = the same scenario as a file")

bad = os.path.join(src, "tests", "bad-inputs", "unknown-key.yaml")
try:
    dpsim.load(bad)
    check(False, "a bad scenario raises")
except dpsim.InputError as e:
    check(e.file == bad and e.line > 0 and e.key_path == "training.micro_bach" and str(e).startswith(f"{bad}:"),
          f"InputError: file {os.path.basename(e.file)}, line {e.line}, key {e.key_path}")
try:
    dpsim.estimate(scenario, overrides={"cluster.nodes": "many"})
    check(False, "a bad override raises")
except dpsim.InputError as e:
    check("--set cluster.nodes=many" in str(e) and e.key_path == "cluster.nodes", f"override refused: {e}")

rows = dpsim.sweep(ib, {"cluster.nodes": [1, 2], "training.micro_batch": [4, 8]})
check([r["axes"] for r in rows] == [{"cluster.nodes": "1", "training.micro_batch": "4"},
                                    {"cluster.nodes": "1", "training.micro_batch": "8"},
                                    {"cluster.nodes": "2", "training.micro_batch": "4"},
                                    {"cluster.nodes": "2", "training.micro_batch": "8"}], "sweep: grid order")
check(rows[3]["result"] == dpsim.estimate(ib, {"cluster.nodes": 2, "training.micro_batch": 8}),
      "sweep row = estimate of its point")

with tempfile.TemporaryDirectory() as tmp:
    png = os.path.join(tmp, "gpus.png")
    env = dict(os.environ, PYTHONPATH=build_python)
    r = subprocess.run([sys.executable, os.path.join(src, "examples", "sweep_gpus.py"), "-o", png], env=env,
                       capture_output=True, text=True)
    with open(png, "rb") if os.path.exists(png) else open(os.devnull, "rb") as f:
        head = f.read(8)
    check(r.returncode == 0 and head == b"\x89PNG\r\n\x1a\n", f"examples/sweep_gpus.py wrote a PNG {r.stderr[-300:]}")
sys.exit(1 if failures else 0)
