#!/usr/bin/env python3
"""What eager PyTorch spends on a Llama 3.1 8B block, kernel by kernel, on the GPU it runs on.

The ground truth for dpsim's compute model (issue 15; docs/simulator.md "Compute"): torchtitan's
Llama block as written at 9dec370 (torchtitan/models/llama/model.py, models/norms.py RMSNorm: fp32
norm, complex-fp32 rotary, repeat_kv copies, SDPA causal, .contiguous() output, silu(w1 x) * w3 x),
bf16 weights as FSDP2's param_dtype bfloat16 computes with. It times, with CUDA events:

  blocks     forward and backward of --layers blocks at --batch x --seq tokens (per block)
  gemm       each of the block's linear layers as forward, input-gradient and weight-gradient GEMMs
  sdpa       F.scaled_dot_product_attention(is_causal=True) forward and backward, the default backend and each
             backend forced (FlashAttention-2, cuDNN, memory-efficient) at 2048, 4096 and --seq tokens
  adamw      one block's parameters in fp32: torch.optim.AdamW foreach and fused step
  copy       a device-to-device copy (bytes read + written per second)
  launch     what one eager op costs the CPU: an in-place add and a tiny linear in a loop (us per call)
  mpt_blocks llm-foundry's MPT-760m block (b2a43a1) at its H100 row's 24 x 2048 tokens, per kernel

and writes the per-kernel profile of one forward+backward (torch.profiler) grouped by kernel name.
Prints a text report; with --out DIR also DIR/torch-llama-probe.json. Runs on CPU at --tiny sizes for a
smoke test (no SDPA before torch 2.0: the same math unfused).
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# Llama 3.1 8B (models/llama-3.1-8b.yaml; torchtitan's llama3 "8B" flavor).
DIM, HEADS, KV_HEADS, FFN, THETA = 4096, 32, 8, 14336, 500000.0


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        out = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x)
        return out * self.weight


def rotary(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    f = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
    return (torch.view_as_real(xq_ * f).flatten(3).type_as(xq),
            torch.view_as_real(xk_ * f).flatten(3).type_as(xk))


def repeat_kv(x, n_rep):
    bs, slen, n_kv, hd = x.shape
    return x[:, :, :, None, :].expand(bs, slen, n_kv, n_rep, hd).reshape(bs, slen, n_kv * n_rep, hd)


def attention(q, k, v):
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    s = q.shape[-2]
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    mask = torch.ones(s, s, dtype=torch.bool, device=q.device).tril()
    return scores.masked_fill(~mask, float("-inf")).softmax(-1) @ v


class Block(nn.Module):
    def __init__(self, dim, heads, kv_heads, ffn):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, dim // heads
        self.wq = nn.Linear(dim, heads * self.hd, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.wo = nn.Linear(heads * self.hd, dim, bias=False)
        self.w1 = nn.Linear(dim, ffn, bias=False)
        self.w2 = nn.Linear(ffn, dim, bias=False)
        self.w3 = nn.Linear(dim, ffn, bias=False)
        self.attention_norm = RMSNorm(dim)
        self.ffn_norm = RMSNorm(dim)

    def forward(self, x, freqs_cis):
        b, s, _ = x.shape
        h = self.attention_norm(x)
        q = self.wq(h).view(b, s, self.heads, self.hd)
        k = self.wk(h).view(b, s, self.kv_heads, self.hd)
        v = self.wv(h).view(b, s, self.kv_heads, self.hd)
        q, k = rotary(q, k, freqs_cis)
        rep = self.heads // self.kv_heads
        k, v = repeat_kv(k, rep), repeat_kv(v, rep)
        o = attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        o = o.transpose(1, 2).contiguous().view(b, s, -1)
        x = x + self.wo(o)
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class MPTBlock(nn.Module):
    """llm-foundry's MPT block (b2a43a1: blocks.py MPTBlock, attention.py GroupedQueryAttention, ffn.py MPTMLP) with
    MPTConfig's defaults: biases, low-precision LayerNorm (bf16: LPLayerNorm runs F.layer_norm in the input's dtype),
    fused Wqkv split into strided views, GELU(approximate='none'), resid_pdrop 0. Attention through SDPA (the run's
    flash-attn v1 Triton kernel is not here): its kernels are set apart from the rest."""

    def __init__(self, d, heads, ratio):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.norm_1, self.norm_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.Wqkv, self.out_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up_proj, self.down_proj = nn.Linear(d, ratio * d), nn.Linear(ratio * d, d)

    def forward(self, x, freqs_cis=None):
        b, s, d = x.shape
        q, k, v = self.Wqkv(self.norm_1(x)).split(d, dim=2)
        q, k, v = (t.view(b, s, self.heads, self.hd).transpose(1, 2) for t in (q, k, v))
        o = attention(q, k, v).transpose(1, 2).reshape(b, s, d)
        x = x + self.out_proj(o)
        return x + self.down_proj(F.gelu(self.up_proj(self.norm_2(x))))


def time_mpt_blocks(args, dev, dt, timer):
    """MPT-760m (d_model 1536, 12 heads, expansion 4) at the H100 README row's micro-batch 24 x 2048."""
    d, heads, batch, seq = (64, 4, 2, 32) if args.tiny else (1536, 12, 24, 2048)
    blocks = nn.ModuleList(MPTBlock(d, heads, 4) for _ in range(args.layers)).to(dev, dt)
    x = torch.randn(batch, seq, d, device=dev, dtype=dt, requires_grad=True)
    m = time_stack(blocks, x, (), args, dev, timer)
    return {"model": "mpt-760m", "micro_batch": x.shape[0], "seq": x.shape[1], **m}


def precompute_freqs_cis(head_dim, seq, theta, device):
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device)[: head_dim // 2].float() / head_dim))
    t = torch.arange(seq, device=device).float()
    return torch.polar(torch.ones(seq, head_dim // 2, device=device), torch.outer(t, freqs))


class Timer:
    """Seconds of GPU work between start() and stop(): CUDA events on a GPU, wall clock on CPU."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def time(self, fn, reps, warmup=2):
        for _ in range(warmup):
            fn()
        self.sync()
        if self.cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(reps):
                fn()
            b.record()
            b.synchronize()
            return a.elapsed_time(b) / 1e3 / reps
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        return (time.perf_counter() - t0) / reps


def time_blocks(args, dev, dt, timer):
    blocks = nn.ModuleList(Block(DIM, HEADS, KV_HEADS, FFN) for _ in range(args.layers)).to(dev, dt)
    freqs = precompute_freqs_cis(DIM // HEADS, args.seq, THETA, dev)
    x = torch.randn(args.batch, args.seq, DIM, device=dev, dtype=dt, requires_grad=True)
    return time_stack(blocks, x, (freqs,), args, dev, timer)


def time_stack(blocks, x, extra, args, dev, timer):
    """Forward (under no_grad: nothing kept) and forward + backward of the blocks per block, and one profiled step."""
    gy = torch.randn_like(x)

    def fwd():
        h = x
        for blk in blocks:
            h = blk(h, *extra)
        return h

    def step():
        fwd().backward(gy)

    with torch.no_grad():
        fwd_only = timer.time(fwd, args.reps)
    step_s = timer.time(step, args.reps)
    prof = profile_step(step, dev) if dev.type == "cuda" else []
    n = len(blocks)
    return {"forward_s_per_block": fwd_only / n, "forward_backward_s_per_block": step_s / n,
            "backward_s_per_block": (step_s - fwd_only) / n, "kernels": prof,
            "note": "forward timed under no_grad (nothing kept); backward = step - forward"}


def profile_step(step, dev):
    from torch.profiler import ProfilerActivity, profile
    step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        us = getattr(e, "self_device_time_total", None)
        if us is None:
            us = getattr(e, "self_cuda_time_total", 0)
        if us and us > 0:
            rows.append({"kernel": e.key[:160], "count": e.count, "total_us": round(us, 1)})
    rows.sort(key=lambda r: -r["total_us"])
    return rows


def linear_shapes(tokens):
    hd = DIM // HEADS
    return {"wq": (DIM, HEADS * hd), "wk": (DIM, KV_HEADS * hd), "wv": (DIM, KV_HEADS * hd),
            "wo": (HEADS * hd, DIM), "w1": (DIM, FFN), "w3": (DIM, FFN), "w2": (FFN, DIM)}


def time_gemms(args, dev, dt, timer):
    m = args.batch * args.seq
    out = []
    for name, (k, n) in linear_shapes(m).items():
        x = torch.randn(m, k, device=dev, dtype=dt)
        w = torch.randn(n, k, device=dev, dtype=dt)
        g = torch.randn(m, n, device=dev, dtype=dt)
        cases = {"forward": (lambda: F.linear(x, w), m, n, k),
                 "input_grad": (lambda: g @ w, m, k, n),
                 "weight_grad": (lambda: g.t() @ x, n, k, m)}
        for kind, (fn, mm, nn_, kk) in cases.items():
            s = timer.time(fn, args.reps)
            out.append({"linear": name, "gemm": kind, "m": mm, "n": nn_, "k": kk, "s": s,
                        "tflops": 2 * mm * nn_ * kk / s / 1e12})
        del x, w, g
    return out


def time_sdpa(args, dev, dt, timer):
    hd = DIM // HEADS
    q, k, v = (torch.randn(args.batch, HEADS, args.seq, hd, device=dev, dtype=dt, requires_grad=True)
               for _ in range(3))
    o = attention(q, k, v)
    go = torch.randn_like(o)
    with torch.no_grad():
        fwd = timer.time(lambda: attention(q, k, v), args.reps)
    both = timer.time(lambda: attention(q, k, v).backward(go), args.reps)
    causal_flops = 4 * args.batch * HEADS * args.seq * args.seq * hd / 2
    return {"forward_s": fwd, "backward_s": both - fwd, "causal_forward_flops": causal_flops,
            "forward_tflops": causal_flops / fwd / 1e12, "backward_over_forward": (both - fwd) / fwd}


def time_sdpa_backends(args, dev, dt, timer):
    """Each SDPA backend on its own (FlashAttention-2 as PyTorch ships it, cuDNN, memory-efficient) by length."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        return {"error": f"no torch.nn.attention: {e}"}
    hd, out = DIM // HEADS, []
    for seq in (2048, 4096, args.seq):
        tokens = args.batch * args.seq  # the same tokens per call at every length
        b = max(1, tokens // seq)
        q, k, v = (torch.randn(b, HEADS, seq, hd, device=dev, dtype=dt, requires_grad=True) for _ in range(3))
        go = torch.randn_like(q)
        flops = 4 * b * HEADS * seq * seq * hd / 2
        for name in ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION"):
            row = {"backend": name, "batch": b, "seq": seq}
            try:
                with sdpa_kernel(getattr(SDPBackend, name)):
                    with torch.no_grad():
                        fwd = timer.time(lambda: attention(q, k, v), args.reps)
                    both = timer.time(lambda: attention(q, k, v).backward(go), args.reps)
                row.update({"forward_s": fwd, "backward_s": both - fwd, "forward_tflops": flops / fwd / 1e12,
                            "backward_over_forward": (both - fwd) / fwd})
            except Exception as e:  # a backend that refuses the shape
                row["error"] = f"{type(e).__name__}: {str(e)[:200]}"
            out.append(row)
        del q, k, v, go
    return out


def time_adamw(args, dev, timer):
    blk = Block(DIM, HEADS, KV_HEADS, FFN)
    params = [nn.Parameter(p.detach().to(dev, torch.float32)) for p in blk.parameters()]
    for p in params:
        p.grad = torch.randn_like(p)
    n = sum(p.numel() for p in params)
    out = {"parameters": n}
    for impl in ("foreach", "fused"):
        if impl == "fused" and dev.type != "cuda":
            continue
        kw = {impl: True}
        try:
            opt = torch.optim.AdamW(params, lr=1e-4, **kw)
        except (TypeError, RuntimeError) as e:
            out[impl] = f"unavailable: {e}"
            continue
        s = timer.time(opt.step, args.reps)
        out[impl] = {"s": s, "ns_per_parameter": s / n * 1e9}
    return out


def time_launch(args, dev, timer):
    """What one eager op costs the CPU (dispatch and launch), where its GPU work is negligible: wall time per call of
    an in-place add on one element and of a 1 x 64 x 64 linear, in a loop, with one synchronisation at the end."""
    n = 50 if args.tiny else 5000
    x, a, w = (torch.zeros(s, device=dev) for s in ((1,), (1, 64), (64, 64)))
    out = {"calls": n}
    for name, fn in (("add", lambda: x.add_(1)), ("linear", lambda: F.linear(a, w))):
        for _ in range(100):
            fn()
        timer.sync()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        timer.sync()
        out[f"{name}_us_per_call"] = (time.perf_counter() - t0) / n * 1e6
    return out


def time_copy(args, dev, timer):
    n = (1 << 30) if not args.tiny else (1 << 20)
    a = torch.empty(n, dtype=torch.float32, device=dev)
    b = torch.empty_like(a)
    s = timer.time(lambda: b.copy_(a), args.reps)
    return {"bytes_moved": 2 * 4 * n, "s": s, "bytes_per_s": 2 * 4 * n / s}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=8192)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--tiny", action="store_true", help="small sizes for a CPU smoke test")
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", default=None, help="comma-separated parts to run (default: all)")
    ap.add_argument("--name", default="torch-llama-probe", help="the JSON file's name under --out")
    args = ap.parse_args()
    global DIM, HEADS, KV_HEADS, FFN
    if args.tiny:
        DIM, HEADS, KV_HEADS, FFN = 64, 4, 2, 128
        args.seq, args.reps = 32, 2
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dt = torch.bfloat16 if dev.type == "cuda" else torch.float32
    timer = Timer(dev)
    torch.manual_seed(0)
    res = {"torch": torch.__version__, "device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu",
           "dtype": str(dt), "layers": args.layers, "batch": args.batch, "seq": args.seq, "reps": args.reps,
           "shape": {"dim": DIM, "heads": HEADS, "kv_heads": KV_HEADS, "ffn": FFN}}
    parts = (("launch", lambda: time_launch(args, dev, timer)),
             ("copy", lambda: time_copy(args, dev, timer)),
             ("gemm", lambda: time_gemms(args, dev, dt, timer)),
             ("sdpa", lambda: time_sdpa(args, dev, dt, timer)),
             ("sdpa_backends", lambda: time_sdpa_backends(args, dev, dt, timer)),
             ("adamw", lambda: time_adamw(args, dev, timer)),
             ("blocks", lambda: time_blocks(args, dev, dt, timer)),
             ("mpt_blocks", lambda: time_mpt_blocks(args, dev, dt, timer)))
    only = set(args.only.split(",")) if args.only else {name for name, _ in parts}
    unknown = only - {name for name, _ in parts}
    if unknown:
        ap.error(f"--only: no part {sorted(unknown)}")
    for name, fn in parts:
        if name not in only:
            continue
        t0 = time.time()
        try:
            res[name] = fn()
        except Exception as e:  # one part failing must not lose the others
            res[name] = {"error": f"{type(e).__name__}: {e}"}
        print(f"[{name}] {time.time() - t0:.1f} s", flush=True)
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    report(res)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, args.name + ".json"), "w") as f:
            json.dump(res, f, indent=1)


def report(res):
    """The parts that ran, as text (the JSON has everything)."""
    print(f"torch {res['torch']} on {res['device']}, {res['dtype']}, batch {res['batch']} x seq {res['seq']}")
    for name in ("launch", "copy", "sdpa", "adamw"):
        if name in res:
            print(f"{name}:", json.dumps(res[name]))
    gemms = res.get("gemm", [])
    for g in gemms if isinstance(gemms, list) else [gemms]:
        if "error" in g:
            print("gemm:", g["error"])
            continue
        print(f"gemm {g['linear']:>3} {g['gemm']:<11} {g['m']:>6}x{g['n']:>6}x{g['k']:>6} "
              f"{g['s'] * 1e3:8.3f} ms {g['tflops']:7.1f} TFLOP/s")
    backends = res.get("sdpa_backends", [])
    for r in backends if isinstance(backends, list) else [backends]:
        print("sdpa backend:", json.dumps(r))
    for name in ("mpt_blocks", "blocks"):
        b = res.get(name)
        if b is None:
            continue
        if "error" in b:
            print(f"{name}:", b["error"])
            continue
        print(f"{name}: forward {b['forward_s_per_block'] * 1e3:.2f} ms, forward + backward "
              f"{b['forward_backward_s_per_block'] * 1e3:.2f} ms per block")
        for r in b["kernels"][:40]:
            print(f"  {r['total_us'] / 1e3:9.3f} ms  x{r['count']:<4} {r['kernel'][:110]}")


if __name__ == "__main__":
    sys.exit(main())
