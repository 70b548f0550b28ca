"""Sweep the GPU count of a scenario with dpsim's Python module and plot throughput and scaling efficiency.

    PYTHONPATH=build/python /usr/bin/python3 examples/sweep_gpus.py [SCENARIO] [-o gpus.png] [--estimate]

Each point is dpsim.predict (SimGrid, fast fidelity) or, with --estimate, dpsim.estimate (the closed form's
perfect-overlap bound); the plot is written with matplotlib's Agg backend (no display needed)."""
import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import dpsim  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
p.add_argument("scenario", nargs="?", default=os.path.join(here, "..", "scenarios", "gpt2-1.5b-16xh100-ib.yaml"))
p.add_argument("-o", "--output", default="gpus.png")
p.add_argument("--nodes", default="1,2,4,8,16", help="node counts (8 GPUs each)")
p.add_argument("--estimate", action="store_true", help="the closed form instead of the simulator")
a = p.parse_args()

rows = dpsim.sweep(a.scenario, {"cluster.nodes": [int(n) for n in a.nodes.split(",")]},
                   command="estimate" if a.estimate else "predict")
bad = [r for r in rows if "error" in r]
if bad:
    sys.exit(f"sweep_gpus: {bad[0]['error']}")
gpus = [r["result"]["context"]["world_size"] for r in rows]
samples = [r["result"]["throughput"]["samples_per_s"] for r in rows]
efficiency = [100 * r["result"]["scaling_efficiency"] for r in rows]

fig, left = plt.subplots(figsize=(6.4, 4.0))
left.plot(gpus, samples, "o-", color="tab:blue")
left.set_xscale("log", base=2)
left.set_xticks(gpus, [str(g) for g in gpus])
left.set_xlabel("GPUs")
left.set_ylabel("samples/s", color="tab:blue")
right = left.twinx()
right.plot(gpus, efficiency, "s--", color="tab:red")
right.set_ylabel("scaling efficiency (%)", color="tab:red")
right.set_ylim(min(50, min(efficiency) - 5), 101)
left.set_title(f"{rows[0]['result']['scenario']}: dpsim {'estimate' if a.estimate else 'predict'}")
fig.tight_layout()
fig.savefig(a.output, dpi=100)
for g, s, e in zip(gpus, samples, efficiency):
    print(f"{g:6d} GPUs  {s:10.1f} samples/s  {e:5.1f}% scaling")
print(f"wrote {a.output}")
