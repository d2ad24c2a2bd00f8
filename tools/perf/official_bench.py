#!/usr/bin/python3
"""Times the official implementations' forward passes on the CPU, for `glimpse bench` comparisons
(docs/performance.md). Not part of Glimpse: it imports the official code from a checkout the user
provides and builds the model with random weights (the time of a forward pass does not depend on
the weights).

  official_bench.py letr --repo LETR_CHECKOUT [--size 682x512] [--queries 1000] [--threads 1]
                         [--runs 3] [--warmup 1]
  official_bench.py coat --repo COAT_CHECKOUT [--batch 1] [--threads 1] [--runs 5] [--warmup 2]

LETR_CHECKOUT is github.com/mlpc-ucsd/LETR (its src/ is put on sys.path; the model is the
stage-2 R50 of script/train/a2_train_stage2_res50.sh: --LETRpost --backbone resnet50
--num_queries 1000); COAT_CHECKOUT is github.com/mlpc-ucsd/CoaT (src/models/coat.py,
coat_lite_tiny; the few names it imports from timm and einops are provided here when those
packages are missing: the identity DropPath of a model without drop-path, to_2tuple,
trunc_normal_, the registry decorator, ImageNet's mean/std and the two rearrange patterns it
uses). Prints one JSON line: the median forward time in milliseconds, wall clock and CPU time of
the process (all threads), and the per-run lists.
Run with Debian's python3 (python3-torch, python3-torchvision).
"""
import argparse
import json
import os
import statistics
import sys
import time
import types


def timed(fn, runs, warmup):
    import torch
    wall, cpu = [], []
    with torch.no_grad():
        for r in range(warmup + runs):
            w0, c0 = time.perf_counter(), time.process_time()
            fn()
            w, c = time.perf_counter() - w0, time.process_time() - c0
            if r >= warmup:
                wall.append(1000 * w)
                cpu.append(1000 * c)
    return wall, cpu


def letr(a):
    sys.path.insert(0, os.path.join(a.repo, "src"))
    import torch
    import torchvision.ops
    import torchvision.ops.misc
    # util/misc.py reads torchvision's version as "0.1" from "0.14" and imports two helpers that
    # newer torchvision lacks; they are used only for empty inputs.
    for mod, name in ((torchvision.ops, "_new_empty_tensor"), (torchvision.ops.misc, "_output_size")):
        if not hasattr(mod, name):
            setattr(mod, name, None)
    # models/multi_head_attention.py imports PyTorch 1.7's _LinearWithBias (a Linear with a bias).
    import torch.nn.modules.linear as linear_mod
    if not hasattr(linear_mod, "_LinearWithBias"):
        class _LinearWithBias(torch.nn.Linear):
            def __init__(self, in_features, out_features):
                super().__init__(in_features, out_features, bias=True)
        linear_mod._LinearWithBias = _LinearWithBias
    from args import get_args_parser
    import models.backbone as bb
    from models import build_model
    bb.is_main_process = lambda: False          # no download of ImageNet weights
    args = get_args_parser().parse_args(["--LETRpost", "--backbone", "resnet50", "--num_queries", str(a.queries),
                                         "--device", "cpu", "--layer1_frozen"])
    built = build_model(args)
    model = built[0] if isinstance(built, tuple) else built
    model.eval()
    w, h = (int(v) for v in a.size.split("x"))
    x = torch.randn(3, h, w)
    return timed(lambda: model([x]), a.runs, a.warmup), f"LETR R50 stage 2, {a.queries} queries, {w}x{h}"


def install_timm_einops_shims():
    import torch
    from torch import nn
    try:
        import timm  # noqa: F401
    except ImportError:
        timm = types.ModuleType("timm")
        data = types.ModuleType("timm.data")
        data.IMAGENET_DEFAULT_MEAN = (0.485, 0.456, 0.406)
        data.IMAGENET_DEFAULT_STD = (0.229, 0.224, 0.225)
        models = types.ModuleType("timm.models")
        layers = types.ModuleType("timm.models.layers")

        class DropPath(nn.Identity):   # only built for drop_path > 0 (training)
            def __init__(self, *args, **kwargs):
                super().__init__()
        layers.DropPath = DropPath
        layers.to_2tuple = lambda x: tuple(x) if isinstance(x, (tuple, list)) else (x, x)
        layers.trunc_normal_ = lambda t, mean=0.0, std=1.0, a=-2.0, b=2.0: nn.init.trunc_normal_(t, mean, std, a, b)
        registry = types.ModuleType("timm.models.registry")
        registry.register_model = lambda fn: fn
        for name, mod in {"timm": timm, "timm.data": data, "timm.models": models, "timm.models.layers": layers,
                          "timm.models.registry": registry}.items():
            sys.modules[name] = mod
    try:
        import einops  # noqa: F401
    except ImportError:
        einops = types.ModuleType("einops")

        def rearrange(x, pattern, **k):
            if pattern == "B h (H W) Ch -> B (h Ch) H W":
                B, h, N, Ch = x.shape
                return x.transpose(2, 3).reshape(B, h * Ch, k["H"], k["W"])
            if pattern == "B (h Ch) H W -> B h (H W) Ch":
                B, hc, H, W = x.shape
                return x.reshape(B, k["h"], hc // k["h"], H * W).transpose(2, 3)
            raise ValueError("rearrange shim: unknown pattern " + pattern)
        einops.rearrange = rearrange
        sys.modules["einops"] = einops
    return torch


def coat(a):
    torch = install_timm_einops_shims()
    sys.path.insert(0, os.path.join(a.repo, "src", "models"))
    import coat as coat_module
    model = coat_module.coat_lite_tiny().eval()
    x = torch.randn(a.batch, 3, 224, 224)
    return timed(lambda: model(x), a.runs, a.warmup), f"CoaT-Lite Tiny, batch {a.batch}, 224x224"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", choices=["letr", "coat"])
    p.add_argument("--repo", required=True)
    p.add_argument("--size", default="682x512")
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    a = p.parse_args()
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(a.threads))   # read when libblas loads
    import torch
    torch.set_num_threads(a.threads)
    (wall, cpu), what = letr(a) if a.model == "letr" else coat(a)
    print(json.dumps({"official": what, "threads": a.threads, "wall_ms": statistics.median(wall),
                      "cpu_ms": statistics.median(cpu), "wall_runs": [round(v, 1) for v in wall],
                      "cpu_runs": [round(v, 1) for v in cpu]}))


if __name__ == "__main__":
    main()
