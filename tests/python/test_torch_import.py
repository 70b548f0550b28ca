"""Checks of python/dpsim/import_torch.py against real PyTorch, in one process (torch loads once, ~6 s):
  - every shipped imported model: parameters (count, names, shapes) = the torchvision module's, gradient-ready order
    = the order autograd makes gradients ready in one backward, and dpsim's DDP buckets (1 MiB first, 25 MiB cap) =
    torch.distributed._compute_bucket_assignment_by_size over that order;
  - that order on the meta device = on the CPU (ResNet-50, a small image: the graph, not the size, sets it);
  - models/resnet-50.yaml (written by hand): the import's parameters and per-layer FLOPs and GEMMs;
  - a plain GPT block: the import's forward FLOPs = core's transformer closed form (dpsim inspect model);
  - refusals: a module that does not import, a callable that raises, data-dependent control flow, an unknown op:
    exit status 2, a message naming them, no file written.
Usage: test_torch_import.py DPSIM SOURCE_DIR  (exit 77 without torch)."""
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile

dpsim, src = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
sys.path[:0] = [os.path.join(src, "python"), os.path.dirname(os.path.abspath(__file__))]
try:
    import torch
    import torch.distributed as dist
    import torchvision
    import yaml
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)
from dpsim import import_torch as it  # noqa: E402

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def real_ready_order(model, inputs):
    """The order autograd makes each parameter's gradient ready: a hook per parameter, one backward."""
    order = []
    hooks = [p.register_hook(lambda g, n=n: order.append(n)) for n, p in model.named_parameters()]
    model(*inputs).sum().backward()
    for h in hooks:
        h.remove()
    return order


def dpsim_bucket_bytes(model_file, tmp):
    base = open(os.path.join(src, "scenarios", "resnet50-8xv100.yaml")).read()
    scenario = os.path.join(tmp, "s.yaml")
    with open(scenario, "w") as f:  # fp32 gradients, 1 MiB first bucket, 25 MiB cap (PyTorch's defaults)
        f.write(base.replace("model: ../models/resnet-50.yaml", f"model: {model_file}"))
    out = json.loads(subprocess.run([dpsim, "estimate", scenario, "--json"], check=True, capture_output=True,
                                    text=True).stdout)
    calls = [c for c in out["comm"] if c["kind"] == "all_reduce" and c["group"] == "data"]
    return [int(c["bytes"]) for c in sorted(calls, key=lambda c: c["index"])], out["model"]["parameters"]


it._register_meta_backward(torch)
SHIPPED = {"resnet-101.yaml": "resnet101", "resnext-50-32x4d.yaml": "resnext50_32x4d",
           "resnext-101-32x8d.yaml": "resnext101_32x8d", "vit-b-16.yaml": "vit_b_16"}
with tempfile.TemporaryDirectory() as tmp:
    for file, fn in SHIPPED.items():
        path = os.path.join(src, "models", file)
        spec = yaml.safe_load(open(path))
        model = it.build(f"torchvision.models:{fn}", [], {})  # torchvision's module, its tensors on meta
        params = dict(model.named_parameters())
        real = sum(p.numel() for p in params.values())
        listed = {t["name"]: t["shape"] for l in spec["layers"] for t in l.get("tensors", [])}
        check(spec["parameters"] == real, f"{file}: {spec['parameters']:,} parameters = sum(p.numel()) {real:,}")
        check(listed == {n: list(p.shape) for n, p in params.items()}, f"{file}: tensor names and shapes")
        order = real_ready_order(model, [torch.zeros(1, 3, 224, 224, device="meta")])
        check(spec["gradient_ready_order"] == order, f"{file}: gradient-ready order of a backward")
        grads = [torch.empty(params[n].shape, dtype=torch.float32) for n in order]
        buckets, _ = dist._compute_bucket_assignment_by_size(grads, [dist._DEFAULT_FIRST_BUCKET_BYTES, 25 << 20])
        torch_bytes = [sum(grads[i].numel() * 4 for i in b) for b in buckets]
        ours, count = dpsim_bucket_bytes(path, tmp)
        check(ours == torch_bytes and count == real,
              f"{file}: dpsim's {len(ours)} DDP buckets = torch's {len(torch_bytes)} "
              f"({', '.join(f'{b / 2**20:.2f}' for b in torch_bytes)} MiB)")

    # The order on meta (what the import records) is the order on the CPU: the autograd engine decides it.
    cpu = torchvision.models.resnet50()
    meta = it.build("torchvision.models:resnet50", [], {})
    check(real_ready_order(cpu, [torch.zeros(2, 3, 32, 32)]) ==
          real_ready_order(meta, [torch.zeros(2, 3, 32, 32, device="meta")]), "resnet50: meta order = CPU order")

    # models/resnet-50.yaml, written from the architecture, against the import.
    counter, _ = it.count(meta, [torch.zeros(2, 3, 224, 224, device="meta")], 2)
    hand = yaml.safe_load(open(os.path.join(src, "models", "resnet-50.yaml")))["layers"]
    imported = [(l.flops, l.gemm and {"m": l.gemm[0], "n": l.gemm[1], "k": l.gemm[2]}) for l in counter.layers]
    check([(l["forward_flops_per_sample"], l.get("gemm")) for l in hand] == imported,
          f"resnet-50.yaml: per-layer FLOPs and GEMMs = the import's ({sum(f for f, _ in imported):,.0f} FLOPs)")
    convs = [l.convolution for l in counter.layers]
    check([l.get("convolution", False) for l in hand] == convs and sum(convs) == 53,
          f"resnet-50.yaml: its {sum(convs)} convolutions are the import's (convolution: true)")
    check(sum(l["parameters"] for l in hand) == sum(p.numel() for p in cpu.parameters()), "resnet-50.yaml: params")

    # A plain GPT block: the import's forward FLOPs against core's transformer (gpt2 family, one layer).
    d, heads, seq = 256, 4, 128
    gpt = os.path.join(tmp, "gpt.yaml")
    with open(gpt, "w") as f:
        f.write(f"transformer: {{model_type: gpt2, vocab_size: 1000, hidden_size: {d}, num_hidden_layers: 1, "
                f"num_attention_heads: {heads}, intermediate_size: {4 * d}, max_position_embeddings: {seq}}}\n")
    ops = json.loads(subprocess.run([dpsim, "inspect", "model", gpt, "--json", "--sequence-length", str(seq)],
                                    check=True, capture_output=True, text=True).stdout)["ops"]
    core = sum(o["forward_flops_per_sample"] for o in ops if o["name"].startswith("h.0."))
    block = it.build("torch_fixtures:GptBlock", [d, heads, seq], {})
    counter, _ = it.count(block, [torch.zeros(2, seq, d, device="meta")], 2, causal_attention=True)
    ours = sum(l.flops for l in counter.layers)
    check(ours == core, f"GPT block d={d} T={seq}: import {ours:,.0f} forward FLOPs = core's closed form {core:,.0f}")

    # Refusals: status 2, the module or op named, no file left behind.
    out = os.path.join(tmp, "m.yaml")
    for target, extra, message in [
            ("no_such_module_xyz:Net", [], "module no_such_module_xyz does not import"),
            ("torch_fixtures:raises", [], "raised ValueError: no such checkpoint"),
            ("torch_fixtures:DataDependent", [], "data-dependent control flow in the model's forward"),
            ("torch_fixtures:UnknownOp", [], "unknown op aten.cumprod in the model's forward")]:
        buf = io.StringIO()
        with contextlib.redirect_stderr(buf):
            status = it.main([target, "--input-shape", "2,4", "-o", out] + extra)
        check(status == 2 and message in buf.getvalue() and not os.path.exists(out)
              and not any(f.startswith(".import-") for f in os.listdir(tmp)), f"refused {target}: {buf.getvalue().strip()}")
    # dpsim import-torch execs the importer (a module that does not import: fails before torch loads).
    r = subprocess.run([dpsim, "import-torch", "no_such_module_xyz:Net", "--input-shape", "1", "-o", out],
                       capture_output=True, text=True)
    check(r.returncode == 2 and "no_such_module_xyz does not import" in r.stderr and not os.path.exists(out),
          f"dpsim import-torch: status {r.returncode}, {r.stderr.strip()}")

sys.exit(1 if failures else 0)
