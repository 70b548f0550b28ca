"""dpsim from Python: the same core and simulator as the `dpsim` command (docs/python.md).

    import dpsim
    s = dpsim.load("scenarios/llama3.1-8b-8xh100.yaml", overrides={"cluster.nodes": 2})
    r = dpsim.estimate(s)                     # the JSON object of `dpsim estimate --json`, as a dict
    r = dpsim.predict(s, fidelity="fast")     # `dpsim predict --json` (in this process; SimGrid in a child)
    rows = dpsim.sweep("scenarios/x.yaml", {"cluster.nodes": [1, 2, 4]})

A bad input raises dpsim.InputError with .file, .line, .key_path and .message. dpsim.import_torch (no compiled code)
imports PyTorch models as layer lists.
"""

import json
import os
import tempfile


class InputError(ValueError):
    """A bad scenario, model or override: str() is dpsim's "file:line: key.path: message"."""

    def __init__(self, text, file="", line=0, key_path="", message=""):
        super().__init__(text)
        self.file = file
        self.line = line
        self.key_path = key_path
        self.message = message or text


def _yaml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)  # JSON is YAML
    return str(value)


def _pairs(overrides):
    return [(str(k), _yaml_value(v)) for k, v in (overrides or {}).items()]


class Scenario:
    """A checked scenario: its file and the overrides applied to it (dpsim.load)."""

    def __init__(self, file, overrides, name):
        self.file = file
        self.overrides = overrides
        self.name = name

    def __repr__(self):
        return f"dpsim.Scenario({self.file!r}, overrides={dict(self.overrides)!r})"


def _native():
    from . import _dpsim  # the compiled module: built by CMake (python/CMakeLists.txt)

    return _dpsim


def load(path_or_dict, overrides=None):
    """Loads and checks a scenario file, or a dict of its keys (paths in it relative to the working directory)."""
    pairs = _pairs(overrides)
    if isinstance(path_or_dict, dict):
        fd, file = tempfile.mkstemp(prefix=".dpsim-scenario-", suffix=".yaml", dir=os.getcwd())
        with os.fdopen(fd, "w") as f:
            json.dump(path_or_dict, f)
        try:
            name = _native().check_scenario(file, pairs)
        except InputError as e:
            raise InputError(str(e).replace(file, "<dict>"), "<dict>", e.line, e.key_path, e.message) from None
        finally:
            os.unlink(file)
        scenario = Scenario(None, pairs, name)
        scenario.data = path_or_dict
        return scenario
    return Scenario(os.fspath(path_or_dict), pairs, _native().check_scenario(os.fspath(path_or_dict), pairs))


def _run(scenario, overrides, call):
    if not isinstance(scenario, Scenario):
        scenario = load(scenario, overrides)
        overrides = None
    pairs = scenario.overrides + _pairs(overrides)
    if scenario.file is not None:
        return json.loads(call(scenario.file, pairs))
    fd, file = tempfile.mkstemp(prefix=".dpsim-scenario-", suffix=".yaml", dir=os.getcwd())
    with os.fdopen(fd, "w") as f:
        json.dump(scenario.data, f)
    try:
        return json.loads(call(file, pairs))
    finally:
        os.unlink(file)


def estimate(scenario, overrides=None, advice=True):
    """`dpsim estimate --json`: the closed form, as a dict."""
    return _run(scenario, overrides, lambda f, p: _native().estimate_json(f, p, advice))


def predict(scenario, overrides=None, fidelity="fast", overlap=True, advice=False):
    """`dpsim predict --json` (fidelity "fast" or "step"; advice re-simulates variants, off by default)."""
    return _run(scenario, overrides, lambda f, p: _native().predict_json(f, p, fidelity, overlap, advice))


def sweep(base, axes, command="estimate", mode="grid", **options):
    """The points of a sweep (dpsim sweep's grid or zip of axes: {key path: [values]}), each as a row
    {"point", "axes", "result"}, or {"point", "axes", "error"} where the point is refused; in point order (the grid's
    first axis varies slowest)."""
    if command not in ("estimate", "predict"):
        raise ValueError(f"command: estimate or predict, not {command!r}")
    if mode not in ("grid", "zip"):
        raise ValueError(f"mode: grid or zip, not {mode!r}")
    # core's sweep_point expands the axes, as dpsim sweep does
    points = _native().sweep_points([(str(k), [_yaml_value(v) for v in vs]) for k, vs in axes.items()], mode)
    run = estimate if command == "estimate" else predict
    rows = []
    for i, point in enumerate(points):
        overrides = dict(point)
        row = {"point": i, "axes": overrides}
        try:
            row["result"] = run(base, overrides, **options)
        except InputError as e:
            row["error"] = str(e)
        rows.append(row)
    return rows
