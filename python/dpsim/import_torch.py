"""Import a PyTorch model as a dpsim layer list (models/*.yaml).

    python3 -m dpsim.import_torch MODULE:CALLABLE [--kwargs JSON] --input-shape 8,3,224,224 -o model.yaml

The callable (a class or a function) is called with --args/--kwargs to build the model. It is built on the meta
device: torch 1.13 has no `with torch.device("meta")`, so a TorchFunctionMode gives device="meta" to every factory
call that names no device (torch.empty, torch.zeros, ...), which is how nn.Module constructors make their parameters.
No parameter memory is allocated, so a 7B model imports in seconds. --no-meta builds it on the CPU instead (then
moves it to meta) for models whose constructor reads tensor values.

One forward runs on a meta input of the given shape (the user's real batch and sequence: nothing is computed, only
shapes), under a TorchDispatchMode that sees every ATen op below autograd and counts, per op: FLOPs (2 per multiply-add
of convolutions, linear layers and attention matmuls; batch norm 8 per element), GEMM shapes, memory traffic (elements
read and written), and through saved_tensors_hooks the activations autograd keeps for the backward. One backward
runs on meta too (convolution_backward gets a meta kernel: its gradients have the shapes of its inputs), and a hook on
every parameter records the order in which autograd makes their gradients ready: what DDP's reducer buckets by after
its first iteration.

What it cannot count: custom CUDA or C++ kernels (ops outside ATen: refused, naming the op), data-dependent control
flow (Tensor.item(), bool(tensor), nonzero on meta tensors: refused, naming the module), and fusion (each ATen op is
counted as eager PyTorch runs it).
"""

import argparse
import importlib
import json
import math
import os
import sys
import tempfile

USAGE_EXIT = 2


class ImportFailure(Exception):
    """An import that cannot be done: the message names the module, the callable or the op."""


def _torch():
    try:
        import torch  # noqa: F401
    except ImportError as e:
        raise ImportFailure(f"PyTorch is not installed for {sys.executable} ({e})")
    return torch


# ---- building the model on the meta device -------------------------------------------------------------------------

def _meta_mode(torch):
    from torch.overrides import TorchFunctionMode

    factories = {torch.empty, torch.zeros, torch.ones, torch.full, torch.rand, torch.randn, torch.randint,
                 torch.arange, torch.linspace, torch.eye, torch.tensor, torch.empty_strided, torch.ones_like,
                 torch.zeros_like, torch.empty_like}

    class MetaFactories(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func in factories and kwargs.get("device") is None and not func.__name__.endswith("_like"):
                kwargs["device"] = "meta"
            return func(*args, **kwargs)

    return MetaFactories()


def resolve(target):
    if ":" not in target:
        raise ImportFailure(f"{target}: expected MODULE:CALLABLE (e.g. torchvision.models:resnet50)")
    module_name, attr = target.split(":", 1)
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # any failure while importing the user's module
        raise ImportFailure(f"module {module_name} does not import: {type(e).__name__}: {e}")
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ImportFailure(f"module {module_name} has no {attr}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ImportFailure(f"{target} is not callable")
    return obj


def build(target, args, kwargs, meta=True):
    fn = resolve(target)  # first: a module that does not import fails before torch loads
    torch = _torch()
    try:
        if meta:
            with _meta_mode(torch):
                model = fn(*args, **kwargs)
        else:
            model = fn(*args, **kwargs)
    except ImportFailure:
        raise
    except Exception as e:
        hint = " (its constructor reads tensor values: try --no-meta)" if meta and "meta" in str(e) else ""
        raise ImportFailure(f"{target}(...) raised {type(e).__name__}: {e}{hint}")
    if not isinstance(model, torch.nn.Module):
        raise ImportFailure(f"{target}(...) returned a {type(model).__name__}, not a torch.nn.Module")
    if not meta:
        model = model.to("meta")
    return model


# ---- meta kernels the backward needs on torch 1.13 ----------------------------------------------------------------

_META_LIB = None


def _register_meta_backward(torch):
    """convolution_backward has no meta kernel in torch 1.13: its gradients have its inputs' shapes."""
    global _META_LIB
    if _META_LIB is not None:
        return
    try:
        torch.empty(1, 1, 1, 1, device="meta").requires_grad_()
        lib = torch.library.Library("aten", "IMPL", "Meta")

        def convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
                                 output_padding, groups, output_mask):
            return (input.new_empty(input.shape) if output_mask[0] else None,
                    weight.new_empty(weight.shape) if output_mask[1] else None,
                    grad_output.new_empty(bias_sizes) if output_mask[2] and bias_sizes is not None else None)

        lib.impl("convolution_backward", convolution_backward)
        _META_LIB = lib
    except RuntimeError as e:
        if "already" not in str(e):  # newer torch has its own meta kernel
            raise


# ---- what each ATen op costs ---------------------------------------------------------------------------------------

# Ops that move no data: views, metadata, factories of inputs' shapes.
FREE = {
    "view", "_unsafe_view", "reshape", "_reshape_alias", "t", "transpose", "permute", "expand", "unsqueeze", "squeeze",
    "slice", "select", "split", "split_with_sizes", "chunk", "unbind", "as_strided", "alias", "detach", "unflatten",
    "flatten", "narrow", "diagonal", "lift_fresh", "empty", "new_empty", "empty_like", "new_zeros", "new_ones",
    "empty_strided", "scalar_tensor", "arange", "ones", "zeros", "full", "_unsafe_split", "expand_as", "view_as",
    "contiguous", "lift_fresh_copy", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like",
}
# Ops whose result depends on tensor values: Python control flow on them cannot be traced with shapes alone.
DATA_DEPENDENT = {"_local_scalar_dense", "is_nonzero", "nonzero", "masked_select", "unique", "_unique2", "item",
                  "equal", "allclose"}
# Elementwise and reduction ops: memory-bound, counted as elements read and written.
ELEMENTWISE = {
    "relu", "relu_", "gelu", "silu", "silu_", "tanh", "sigmoid", "hardtanh", "hardtanh_", "hardswish", "hardswish_",
    "add", "add_", "mul", "mul_", "div", "div_", "sub", "sub_", "neg", "pow", "rsqrt", "sqrt", "exp", "log", "abs",
    "_softmax", "softmax", "_log_softmax", "log_softmax", "native_dropout", "masked_fill", "masked_fill_", "where",
    "mean", "sum", "cat", "stack", "clone", "copy_", "_to_copy", "fill_", "zero_", "tril", "triu", "erf", "clamp",
    "clamp_", "maximum", "minimum", "cumsum", "native_layer_norm", "embedding", "max_pool2d_with_indices",
    "avg_pool2d", "_adaptive_avg_pool2d", "adaptive_avg_pool2d", "gelu_", "leaky_relu", "leaky_relu_", "elu", "rsub",
    "bernoulli_", "sqrt_", "reciprocal", "amax", "var_mean", "max", "square", "cos", "sin", "index_select",
    "constant_pad_nd", "roll", "ne", "eq", "lt", "gt", "le", "ge", "logical_not", "bitwise_not", "type_as",
}
# Those whose backward only routes gradients (no saved input to read): backward passes = forward passes.
ROUTING = {"add", "add_", "sub", "sub_", "cat", "stack", "clone", "copy_", "_to_copy", "max_pool2d_with_indices",
           "avg_pool2d", "_adaptive_avg_pool2d", "adaptive_avg_pool2d", "mean", "sum", "constant_pad_nd", "roll"}
# Batch norm (training): forward reads x for the statistics, reads it again and writes y; backward reads dy and x for
# the reductions, then both again and writes dx; 8 FLOPs per element (models/resnet-50.yaml's convention).
BATCH_NORM = {"native_batch_norm", "_native_batch_norm_legit", "cudnn_batch_norm"}
BATCH_NORM_FLOPS_PER_ELEMENT = 8
BATCH_NORM_PASSES = (3, 5)
# A convolution reads its input and writes its output once forward; backward, dgrad reads dy and writes dx, wgrad
# reads dy and x: two passes (models/resnet-50.yaml's convention).
CONV_PASSES = (1, 2)
MATMUL = {"mm", "addmm", "bmm", "baddbmm"}


def _tensors(torch, values):
    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out.extend(_tensors(torch, v))
    return out


class Layer:
    def __init__(self, name, op, call, leaf):
        self.name = name
        self.op = op
        self.call = call  # which call of the module (a module can run several times: ResNet's relu)
        self.leaf = leaf
        self.flops = 0.0
        self.gemm = None  # (m, n, k, batch) per sample
        self.memory = None  # (elements per sample, forward passes, backward passes)
        self.convolution = False  # its memory elements are a convolution's input and output feature maps
        self.tensors = []  # parameter names, first used here
        self.saved_elements = 0.0
        self.kind = "elementwise"


class Counter:
    """A TorchDispatchMode body: one Layer per costed ATen op, attributed to the innermost module running."""

    def __init__(self, torch, model, batch, causal_attention):
        self.torch = torch
        self.batch = batch
        self.causal_attention = causal_attention
        self.layers = []
        self.module_stack = [""]
        self.call_stack = [0]
        self.calls = 0
        self.leaves = {n for n, m in model.named_modules() if not list(m.children())}
        # Keyed by id(): meta tensors hold no memory, so keeping them alive for one forward costs nothing and keeps
        # their ids unique.
        self.keep = []
        self.derived = {}  # id(tensor) -> parameter names it is a view of
        self.params = {}
        for name, p in model.named_parameters():
            self.params[name] = p
            self.derived[id(p)] = (name,)
        for _, b in model.named_buffers():
            self.derived[id(b)] = ()  # module state (running statistics): not an activation
        self.saved_ids = set()
        self.pending_saved = 0.0  # saved before the op that saves them runs (autograd saves inputs, then calls it)
        self.last_outputs = set()

    def where(self):
        return self.module_stack[-1] or "the model's forward"

    def param_names(self, tensors):
        names = []
        for t in tensors:
            for n in self.derived.get(id(t), ()):
                if n not in names:
                    names.append(n)
        return names

    def on_op(self, func, args, kwargs, out):
        torch = self.torch
        name = func.overloadpacket.__name__
        ins = _tensors(torch, list(args) + list(kwargs.values()))
        outs = _tensors(torch, [out])
        params = self.param_names(ins)
        if name in DATA_DEPENDENT:
            raise ImportFailure(f"data-dependent control flow in {self.where()}: aten.{name} needs tensor values "
                                "(Tensor.item(), bool(tensor), nonzero); dpsim counts from shapes only")
        state_only = bool(ins) and all(id(t) in self.derived for t in ins)  # views of parameters and buffers
        if name in FREE or state_only:
            # no data moved, or module state updated from itself (batch norm's num_batches_tracked += 1)
            for o in outs:
                if state_only:
                    self.keep.append(o)
                    self.derived[id(o)] = tuple(params)
            return
        layer = Layer(self.module_stack[-1], name, self.call_stack[-1], self.module_stack[-1] in self.leaves)
        if name == "convolution":
            self.conv(layer, args)
        elif name in MATMUL:
            self.matmul(layer, name, args, params)
        elif name in BATCH_NORM:
            n = outs[0].numel() / self.batch
            layer.flops = BATCH_NORM_FLOPS_PER_ELEMENT * n
            layer.memory = (n, *BATCH_NORM_PASSES)
        elif name in ELEMENTWISE:
            self.elementwise(layer, name, ins, outs, params)
        else:
            raise ImportFailure(f"unknown op aten.{name} in {self.where()}: dpsim does not know its cost "
                                "(a custom kernel, or an op to add to python/dpsim/import_torch.py)")
        for n in params:
            if not any(n in l.tensors for l in self.layers):
                layer.tensors.append(n)
        layer.saved_elements += self.pending_saved
        self.pending_saved = 0.0
        self.last_outputs = {id(o) for o in outs}
        self.layers.append(layer)

    def conv(self, layer, args):
        x, w = args[0], args[1]
        groups = int(args[8])
        out_numel = self._conv_out_numel(x, w, args)
        cout, cin_g = int(w.shape[0]), int(w.shape[1])
        kernel = math.prod(int(s) for s in w.shape[2:])
        pixels = out_numel / (self.batch * cout)
        layer.kind = "matmul"
        layer.flops = 2.0 * out_numel / self.batch * cin_g * kernel
        layer.gemm = (pixels, cout // groups, cin_g * kernel, groups)
        layer.memory = ((x.numel() + out_numel) / self.batch, *CONV_PASSES)
        layer.convolution = True

    def _conv_out_numel(self, x, w, args):
        stride, padding, dilation = args[3], args[4], args[5]
        if args[6]:
            raise ImportFailure(f"transposed convolution in {self.where()}: dpsim's import does not count it yet")
        spatial = []
        for i, size in enumerate(x.shape[2:]):
            k = int(w.shape[2 + i])
            spatial.append((int(size) + 2 * padding[i] - dilation[i] * (k - 1) - 1) // stride[i] + 1)
        return int(x.shape[0]) * int(w.shape[0]) * math.prod(spatial)

    def matmul(self, layer, name, args, params):
        a, b = (args[1], args[2]) if name in ("addmm", "baddbmm") else (args[0], args[1])
        if name in ("bmm", "baddbmm"):
            batch, m, k = (int(s) for s in a.shape)
            n = int(b.shape[2])
        else:
            batch, (m, k), n = 1, (int(s) for s in a.shape), int(b.shape[1])
        flops = 2.0 * batch * m * n * k / self.batch
        weights = bool(params)
        if weights:  # activations x weights: a linear layer, rows are the batch's tokens
            layer.kind = "matmul"
            layer.gemm = (batch * m / self.batch, n, k, 1)
        else:  # activations x activations: attention's scores and values, a product per sample and head
            layer.kind = "attention"
            if self.causal_attention:
                flops /= 2  # a causal kernel (FlashAttention) skips the masked half, as core's transformer assumes
            layer.gemm = (m, n, k, batch / self.batch)
        layer.flops = flops

    def elementwise(self, layer, name, ins, outs, params):
        # Parameters are read once per step whatever the batch: count only activations as memory-bound traffic.
        acts = [t for t in ins if id(t) not in self.derived]
        out_n = sum(o.numel() for o in outs if o.dtype.is_floating_point) or sum(o.numel() for o in outs)
        if name == "max_pool2d_with_indices":
            out_n = outs[0].numel()  # the indices are int64 and stay for the backward
        moved = sum(t.numel() for t in acts) + out_n
        if out_n == 0:
            return
        passes = moved / out_n
        backward = passes if name in ROUTING else passes + 1
        layer.memory = (out_n / self.batch, passes, backward)

    def saved(self, t):
        if not isinstance(t, self.torch.Tensor) or id(t) in self.derived or id(t) in self.saved_ids:
            return
        self.keep.append(t)
        self.saved_ids.add(id(t))
        if id(t) in self.last_outputs and self.layers:  # an output the last op saves (relu's result)
            self.layers[-1].saved_elements += t.numel() / self.batch
        else:  # an input of the op about to run
            self.pending_saved += t.numel() / self.batch


def count(model, inputs, batch, causal_attention=False):
    """Runs one forward and one backward on meta; returns (layers, gradient-ready order)."""
    torch = _torch()
    from torch.utils._python_dispatch import TorchDispatchMode

    _register_meta_backward(torch)
    counter = Counter(torch, model, batch, causal_attention)

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = func.overloadpacket.__name__
            if name in DATA_DEPENDENT:
                counter.on_op(func, args, kwargs, None)
            out = func(*args, **kwargs)
            counter.on_op(func, args, kwargs, out)
            return out

    hooks = []
    for mod_name, mod in model.named_modules():
        def pre(m, i, mod_name=mod_name):
            counter.calls += 1
            counter.module_stack.append(mod_name)
            counter.call_stack.append(counter.calls)

        def post(m, i, o, mod_name=mod_name):
            counter.module_stack.pop()
            counter.call_stack.pop()

        hooks.append(mod.register_forward_pre_hook(pre))
        hooks.append(mod.register_forward_hook(post))
    order = []
    for name, p in model.named_parameters():
        if p.requires_grad:
            hooks.append(p.register_hook(lambda g, name=name: order.append(name)))
    model.train()
    try:
        with torch.autograd.graph.saved_tensors_hooks(lambda t: (counter.saved(t), t)[1], lambda t: t):
            with Mode():
                out = model(*inputs)
        for h in hooks[:2 * len(list(model.named_modules()))]:
            h.remove()
        loss = sum(t.float().sum() for t in _tensors(torch, [_outputs(out)]) if t.requires_grad)
        if not isinstance(loss, torch.Tensor):
            raise ImportFailure("the model's forward returned no tensor that needs a gradient")
        loss.backward()
    except ImportFailure:
        raise
    except NotImplementedError as e:
        raise ImportFailure(f"an op has no meta kernel in {counter.where()}: {str(e).splitlines()[0]}")
    except Exception as e:
        if "meta" in str(e) and ("item" in str(e) or "data" in str(e)):
            raise ImportFailure(f"data-dependent control flow in {counter.where()}: {str(e).splitlines()[0]}")
        raise ImportFailure(f"the forward raised in {counter.where()}: {type(e).__name__}: {e}")
    finally:
        for h in hooks:
            h.remove()
    missing = [n for n, p in model.named_parameters() if p.requires_grad and n not in order]
    if missing:
        raise ImportFailure(f"parameter {missing[0]} gets no gradient in the backward (unused in forward: DDP needs "
                            "find_unused_parameters, which dpsim does not model)")
    return counter, order


def _outputs(out):
    if hasattr(out, "to_tuple"):  # Hugging Face ModelOutput
        return out.to_tuple()
    if isinstance(out, dict):
        return list(out.values())
    return out


# ---- writing the layer list ----------------------------------------------------------------------------------------

def _num(x):
    x = float(x)
    return str(int(x)) if x.is_integer() else repr(x)


def layer_names(layers):
    """A layer is named by its module; a module call that runs several costed ops names each by op."""
    per_call = {}
    for l in layers:
        per_call.setdefault(l.call, []).append(l)
    names = []
    used = {}
    for l in layers:
        base = l.name or "model"
        if len(per_call[l.call]) > 1 or not l.leaf:
            base = f"{base}.{l.op}" if l.name else l.op
        used[base] = used.get(base, 0) + 1
        names.append(base if used[base] == 1 else f"{base}.{used[base]}")
    return names


def render(name, header, counter, order, params):
    lines = [f"# {h}" if h else "#" for h in header]
    total = sum(p.numel() for p in params.values())
    lines += [f"name: {name}", "input: {samples_unit: sample, tokens_per_sample: 1}", f"parameters: {total}",
              "layers:"]
    for lname, l in zip(layer_names(counter.layers), counter.layers):
        tensors = [(n, list(params[n].shape)) for n in l.tensors]
        lines.append(f"  - name: {json.dumps(lname)}")
        lines.append(f"    parameters: {sum(params[n].numel() for n, _ in tensors)}")
        if tensors:
            lines.append("    tensors:")
            for n, shape in tensors:
                lines.append(f"      - {{name: {json.dumps(n)}, shape: [{', '.join(str(int(s)) for s in shape)}]}}")
        lines.append(f"    forward_flops_per_sample: {_num(l.flops)}")
        if l.gemm:
            m, n, k, b = l.gemm
            g = f"m: {_num(m)}, n: {_num(n)}, k: {_num(k)}" + (f", batch: {_num(b)}" if b != 1 else "")
            lines.append(f"    gemm: {{{g}}}")
        if l.memory:
            e, f, b = l.memory
            lines.append(f"    memory: {{elements_per_sample: {_num(e)}, forward_passes: {_num(f)}, "
                         f"backward_passes: {_num(b)}}}")
        if l.saved_elements:
            lines.append(f"    activation_elements_per_sample: {_num(l.saved_elements)}")
        if l.convolution:
            lines.append("    convolution: true")
    lines.append("gradient_ready_order:")
    lines += [f"  - {json.dumps(n)}" for n in order]
    return "\n".join(lines) + "\n"


def write_atomic(path, text):
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".import-", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _shape(text):
    try:
        dims = [int(d) for d in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text}: expected a shape like 8,3,224,224")
    if not dims or any(d < 1 for d in dims):
        raise argparse.ArgumentTypeError(f"{text}: every dimension is at least 1")
    return dims


def parser():
    p = argparse.ArgumentParser(prog="dpsim import-torch", description=__doc__.split("\n\n")[0])
    p.add_argument("target", help="MODULE:CALLABLE that builds the model (a class or a function)")
    p.add_argument("--args", default="[]", help="JSON list of positional arguments for the callable")
    p.add_argument("--kwargs", default="{}", help="JSON object of keyword arguments for the callable")
    p.add_argument("--input-shape", type=_shape, action="append", required=True,
                   help="shape of a forward input, batch first (repeat for several inputs); the real batch and "
                        "sequence cost nothing on the meta device")
    p.add_argument("--input-dtype", action="append", choices=["float32", "int64"],
                   help="dtype of each input (default float32; int64 for token ids)")
    p.add_argument("--causal-attention", action="store_true",
                   help="halve attention matmul FLOPs, as a causal FlashAttention kernel skips the masked half "
                        "(core's transformer convention)")
    p.add_argument("--name", help="model name (default: the callable's name)")
    p.add_argument("--no-meta", action="store_true", help="build the model on the CPU (constructors that read values)")
    p.add_argument("-o", "--output", required=True, help="model file to write (written atomically)")
    return p


def import_model(target, args, kwargs, shapes, dtypes, causal_attention=False, name=None, meta=True, command=None):
    torch = _torch()
    model = build(target, args, kwargs, meta=meta)
    dtypes = dtypes or []
    inputs = []
    for i, shape in enumerate(shapes):
        dtype = torch.int64 if i < len(dtypes) and dtypes[i] == "int64" else torch.float32
        inputs.append(torch.zeros(shape, dtype=dtype, device="meta"))
    batch = shapes[0][0]
    counter, order = count(model, inputs, batch, causal_attention)
    params = dict(model.named_parameters())
    import platform
    header = [f"{name or target}: imported from PyTorch by python/dpsim/import_torch.py "
              f"(torch {torch.__version__}, Python {platform.python_version()}).",
              "Regenerate: " + (command or f"python3 -m dpsim.import_torch {target}"),
              "Layers: one per costed ATen op of one forward, in forward order, named by the module that ran it;",
              "tensors: each parameter in the layer that first used it (registration names and shapes);",
              "gradient_ready_order: the order autograd made each gradient ready in one backward (parameter hooks).",
              f"Per sample = counted on a batch of {batch}, divided by {batch}."]
    return render(name or target.split(":")[1], header, counter, order, params)


def main(argv=None):
    p = parser()
    a = p.parse_args(argv)
    try:
        args = json.loads(a.args)
        kwargs = json.loads(a.kwargs)
    except json.JSONDecodeError as e:
        print(f"dpsim import-torch: --args/--kwargs: not JSON: {e}", file=sys.stderr)
        return USAGE_EXIT
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        print("dpsim import-torch: --args is a JSON list and --kwargs a JSON object", file=sys.stderr)
        return USAGE_EXIT
    command = "python3 -m dpsim.import_torch " + " ".join(
        arg if arg.replace(",", "").replace(".", "").replace(":", "").replace("-", "").replace("_", "").replace(
            "/", "").isalnum() else "'" + arg + "'" for arg in (argv if argv is not None else sys.argv[1:]))
    try:
        text = import_model(a.target, args, kwargs, a.input_shape, a.input_dtype, a.causal_attention, a.name,
                            not a.no_meta, command)
        write_atomic(a.output, text)
    except ImportFailure as e:
        print(f"dpsim import-torch: {a.target}: {e}", file=sys.stderr)
        return USAGE_EXIT
    return 0


if __name__ == "__main__":
    sys.exit(main())
