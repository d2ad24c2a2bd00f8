#!/usr/bin/python3
"""Convert LETR checkpoints to Glimpse's HDF5 checkpoint format, and write random torchvision
ResNet reference data for Glimpse's tests.

Run with Debian's python3 (python3-torch, python3-torchvision, python3-h5py):

  convert_letr.py IN.pth --out OUT.h5 [--short-side S] [--max-long-side M]
  convert_letr.py IN1.pth IN2.pth ... --out DIR     (each to DIR/<name>.h5; failures are
                                                      reported and the others still converted)
      Official LETR checkpoint ({'model': state_dict, 'args': Namespace, 'optimizer', ...};
      stage 1 = coarse only, stage 2 = coarse + fine) -> Glimpse checkpoint, family "letr".
      Names: the backbone is kept once as backbone.0.body.* (stage-2 files repeat it under
      letr.backbone.0.body.*; both copies must be equal); bbox_embed (older files) becomes
      lines_embed; a stage-1 model's input_proj/query_embed/transformer/class_embed/
      lines_embed move under letr.* (Glimpse's coarse stage); 'module.' prefixes are dropped.
      The config (backbone, widths, layer counts, queries, levels) is derived from the tensor
      shapes and checked against 'args'; nheads and dropout come from 'args' (default 8, 0.1).
      Unknown or missing tensors are refused with a list of their names.

  convert_letr.py --resnet-random ARCH --seed S --out X.h5 --features-out F.h5
                  [--input-size HxW]
      A torchvision ResNet (resnet18/34/50/101) with random weights and randomised batch-norm
      statistics -> backbone-only checkpoint (family "resnet", torchvision names), plus the
      reference C2..C5 features of a fixed random input (default 64x96) in a glimpse.trace
      file (tensors input [1,3,H,W], c2, c3, c4, c5).

Glimpse HDF5 checkpoint layout (docs/formats.md): root attributes kind = "glimpse.checkpoint",
format_version = 1; group /meta with attributes family, config (JSON string),
format_version; /params/<pytorch name> one float32 dataset per parameter or buffer.
"""
import argparse
import inspect
import json
import os
import re
import sys
import tempfile

# Exit status when torch/h5py are missing (tests skip on it); 1 = conversion refused, 2 = usage.
EXIT_NO_TORCH = 3
torch = h5py = np = None


def load_modules():
    """Imports torch, h5py and numpy (slow; done after the arguments are checked)."""
    global torch, h5py, np
    try:
        import h5py as _h5py
        import numpy as _np
        import torch as _torch
    except ImportError as e:
        print("convert_letr.py: needs Debian's python3 with torch and h5py (%s); "
              "run it with /usr/bin/python3" % e, file=sys.stderr)
        sys.exit(EXIT_NO_TORCH)
    torch, h5py, np = _torch, _h5py, _np

FORMAT_VERSION = 1
LETR_MEAN = [0.538, 0.494, 0.453]
LETR_STD = [0.257, 0.263, 0.273]
RESNET_BLOCKS = {
    "resnet18": (False, (2, 2, 2, 2)),
    "resnet34": (False, (3, 4, 6, 3)),
    "resnet50": (True, (3, 4, 6, 3)),
    "resnet101": (True, (3, 4, 23, 3)),
}


class ConvertError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Names and shapes Glimpse expects (mirrors core/models/letr/model.cpp)

def resnet_tensors(arch, prefix=""):
    """name -> shape of a torchvision ResNet trunk (conv1..layer4) with FrozenBatchNorm2d."""
    bottleneck, blocks = RESNET_BLOCKS[arch]
    out = {}

    def bn(name, c):
        for b in ("weight", "bias", "running_mean", "running_var"):
            out["%s%s.%s" % (prefix, name, b)] = (c,)

    out[prefix + "conv1.weight"] = (64, 3, 7, 7)
    bn("bn1", 64)
    expansion = 4 if bottleneck else 1
    inplanes = 64
    for li, n in enumerate(blocks):
        planes = 64 << li
        for bi in range(n):
            stride = 2 if (bi == 0 and li > 0) else 1
            p = "layer%d.%d." % (li + 1, bi)
            if bottleneck:
                out[prefix + p + "conv1.weight"] = (planes, inplanes, 1, 1)
                bn(p + "bn1", planes)
                out[prefix + p + "conv2.weight"] = (planes, planes, 3, 3)
                bn(p + "bn2", planes)
                out[prefix + p + "conv3.weight"] = (planes * 4, planes, 1, 1)
                bn(p + "bn3", planes * 4)
            else:
                out[prefix + p + "conv1.weight"] = (planes, inplanes, 3, 3)
                bn(p + "bn1", planes)
                out[prefix + p + "conv2.weight"] = (planes, planes, 3, 3)
                bn(p + "bn2", planes)
            if stride != 1 or inplanes != planes * expansion:
                out[prefix + p + "downsample.0.weight"] = (planes * expansion, inplanes, 1, 1)
                bn(p + "downsample.1", planes * expansion)
            inplanes = planes * expansion
    return out


def level_channels(arch, level):
    bottleneck = RESNET_BLOCKS[arch][0]
    return (64 << (level - 2)) * (4 if bottleneck else 1)


def transformer_tensors(prefix, d, ffn, enc, dec):
    out = {}

    def attn(p):
        out[p + "in_proj_weight"] = (3 * d, d)
        out[p + "in_proj_bias"] = (3 * d,)
        out[p + "out_proj.weight"] = (d, d)
        out[p + "out_proj.bias"] = (d,)

    def ffn_norms(p, norms):
        out[p + "linear1.weight"] = (ffn, d)
        out[p + "linear1.bias"] = (ffn,)
        out[p + "linear2.weight"] = (d, ffn)
        out[p + "linear2.bias"] = (d,)
        for n in norms:
            out[p + n + ".weight"] = (d,)
            out[p + n + ".bias"] = (d,)

    for i in range(enc):
        p = "%sencoder.layers.%d." % (prefix, i)
        attn(p + "self_attn.")
        ffn_norms(p, ("norm1", "norm2"))
    for i in range(dec):
        p = "%sdecoder.layers.%d." % (prefix, i)
        attn(p + "self_attn.")
        attn(p + "multihead_attn.")
        ffn_norms(p, ("norm1", "norm2", "norm3"))
    out[prefix + "decoder.norm.weight"] = (d,)
    out[prefix + "decoder.norm.bias"] = (d,)
    return out


def stage_tensors(prefix, cfg, level, enc, dec):
    d = cfg["hidden_dim"]
    out = {
        prefix + "input_proj.weight": (d, level_channels(cfg["backbone"], level), 1, 1),
        prefix + "input_proj.bias": (d,),
        prefix + "class_embed.weight": (cfg["num_classes"] + 1, d),
        prefix + "class_embed.bias": (cfg["num_classes"] + 1,),
    }
    for i, (a, b) in enumerate(((d, d), (d, d), (d, 4))):
        out["%slines_embed.layers.%d.weight" % (prefix, i)] = (b, a)
        out["%slines_embed.layers.%d.bias" % (prefix, i)] = (b,)
    out.update(transformer_tensors(prefix + "transformer.", d, cfg["dim_feedforward"], enc, dec))
    return out


def letr_tensors(cfg):
    """Every parameter/buffer name of Glimpse's LetrModel for `cfg` -> shape."""
    out = resnet_tensors(cfg["backbone"], "backbone.0.body.")
    out.update(stage_tensors("letr.", cfg, cfg["coarse_level"], cfg["coarse_enc_layers"],
                             cfg["coarse_dec_layers"]))
    out["letr.query_embed.weight"] = (cfg["num_queries"], cfg["hidden_dim"])
    if cfg["stages"] == "coarse+fine":
        out.update(stage_tensors("", cfg, cfg["fine_level"], cfg["fine_enc_layers"],
                                 cfg["fine_dec_layers"]))
    return out


# ---------------------------------------------------------------------------------------------
# HDF5 writing

def write_h5_atomically(path, fill):
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".h5", dir=d)
    os.close(fd)
    try:
        # The latest format, as Glimpse writes: superblock, object headers and chunk indexes
        # carry checksums (docs/integrity.md).
        with h5py.File(tmp, "w", libver="latest") as f:
            fill(f)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def checked_dataset(group, name, array):
    """A dataset whose every bit is checksummed, as Glimpse's own writer stores tensors:
    Fletcher-32 per chunk, or (0-d and empty arrays, which cannot be chunked) compact, inside
    the checksummed object header."""
    array = np.asarray(array, order="C")  # (np.ascontiguousarray would make 0-d arrays 1-d)
    if array.ndim > 0 and array.size > 0:
        return group.create_dataset(name, data=array, fletcher32=True)
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_layout(h5py.h5d.COMPACT)
    space = h5py.h5s.create(h5py.h5s.SCALAR) if array.ndim == 0 else h5py.h5s.create_simple(array.shape)
    dsid = h5py.h5d.create(group.id, name.encode(), h5py.h5t.py_create(array.dtype, logical=1), space, dcpl=dcpl)
    if array.size > 0:
        dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, array)
    return group[name]


def fixed_string(s):
    """A string attribute stored fixed-length (inside the checksummed object header; h5py's
    default variable-length strings live in the unchecked global heap). Glimpse reads both."""
    return np.bytes_(s.encode("utf-8"))


def write_checkpoint(path, family, config, tensors):
    def fill(f):
        f.attrs["kind"] = fixed_string("glimpse.checkpoint")
        f.attrs["format_version"] = np.int64(FORMAT_VERSION)
        meta = f.create_group("meta")
        meta.attrs["family"] = fixed_string(family)
        meta.attrs["config"] = fixed_string(json.dumps(config))
        meta.attrs["format_version"] = np.int64(FORMAT_VERSION)
        params = f.create_group("params")
        for name in sorted(tensors):
            checked_dataset(params, name, tensors[name].detach().cpu().to(torch.float32).contiguous().numpy())

    write_h5_atomically(path, fill)


def write_trace(path, family, meta, tensors):
    def fill(f):
        f.attrs["kind"] = fixed_string("glimpse.trace")
        f.attrs["format_version"] = np.int64(FORMAT_VERSION)
        m = f.create_group("meta")
        m.attrs["family"] = fixed_string(family)
        m.attrs["meta"] = fixed_string(json.dumps(meta))
        t = f.create_group("tensors")
        for name in sorted(tensors):
            checked_dataset(t, name, tensors[name].detach().cpu().contiguous().numpy())

    write_h5_atomically(path, fill)


# ---------------------------------------------------------------------------------------------
# Official LETR -> Glimpse

def torch_load(path):
    kwargs = {"map_location": "cpu"}
    # The file holds an argparse Namespace next to the tensors: full unpickling is needed
    # (torch >= 2.6 defaults to weights_only=True). Only convert files you trust.
    if "weights_only" in inspect.signature(torch.load).parameters:
        kwargs["weights_only"] = False
    try:
        return torch.load(path, **kwargs)
    except Exception as e:
        raise ConvertError("%s: cannot read as a PyTorch checkpoint (%s: %s)" % (path, type(e).__name__, e))


def plain_state_dict(ck, path, what):
    """A loaded .pth as {name: tensor}: unwraps a "model" or "state_dict" entry, strips
    DataParallel's "module." prefix, refuses pickled modules, non-tensors and empty files.
    `what` names the expected model in the messages ("M-LSD", "EfficientZero")."""
    if isinstance(ck, torch.nn.Module):
        raise ConvertError("%s: a pickled %s module, not a state dict; save model.state_dict() and convert that"
                           % (path, type(ck).__name__))
    if not isinstance(ck, dict):
        raise ConvertError("%s: expected an %s state dict, found a %s" % (path, what, type(ck).__name__))
    for key in ("model", "state_dict"):
        if key in ck and isinstance(ck[key], dict):
            ck = ck[key]
            break
    if not ck:
        raise ConvertError("%s: the state dict is empty" % path)
    out = {}
    for k, v in ck.items():
        if not torch.is_tensor(v):
            raise ConvertError("%s: entry '%s' is a %s, not a tensor (not an %s state dict)"
                               % (path, k, type(v).__name__, what))
        name = k[len("module."):] if k.startswith("module.") else k
        if name in out:
            raise ConvertError("%s: two entries map to '%s'" % (path, name))
        out[name] = v
    return out


def normalize_names(sd, path):
    """Official names -> Glimpse names. Returns (tensors, notes)."""
    notes = []
    src = {}
    for k, v in sd.items():
        if not torch.is_tensor(v):
            raise ConvertError("%s: model entry '%s' is not a tensor" % (path, k))
        name = k[len("module."):] if k.startswith("module.") else k
        name = re.sub(r"(^|\.)bbox_embed\.", r"\1lines_embed.", name)
        if name.endswith("num_batches_tracked"):
            continue
        if name in src:
            raise ConvertError("%s: two entries map to '%s'" % (path, name))
        src[name] = v
    if any(k.startswith("bbox_embed.") or ".bbox_embed." in k for k in sd):
        notes.append("renamed bbox_embed -> lines_embed")

    two_stage = any(k.startswith("letr.") for k in src)
    out = {}
    dup_checked = 0
    for name, v in src.items():
        if name.startswith("letr.backbone."):
            top = name[len("letr."):]
            if top in src:
                if src[top].shape != v.shape or not torch.equal(src[top], v):
                    raise ConvertError("%s: '%s' differs from '%s' (the two backbone copies must be "
                                       "equal)" % (path, name, top))
                dup_checked += 1
            else:
                out[top] = v
            continue
        if not two_stage and not name.startswith("backbone."):
            name = "letr." + name
        out[name] = v
    if dup_checked:
        notes.append("dropped %d duplicated letr.backbone.* tensors (equal to backbone.*)" % dup_checked)
    return out, two_stage, notes


def count_layers(tensors, prefix):
    idx = set()
    pat = re.compile(re.escape(prefix) + r"(\d+)\.")
    for k in tensors:
        m = pat.match(k)
        if m:
            idx.add(int(m.group(1)))
    return len(idx)


def derive_config(tensors, two_stage, args, path, short_side, max_long_side):
    def need(name):
        if name not in tensors:
            raise ConvertError("%s: missing tensor '%s' (needed to derive the config)" % (path, name))
        return tensors[name]

    qe = need("letr.query_embed.weight")
    num_queries, d = qe.shape
    body = "backbone.0.body."
    bottleneck = (body + "layer1.0.conv3.weight") in tensors
    blocks = tuple(count_layers(tensors, body + "layer%d." % i) for i in range(1, 5))
    arch = None
    for name, (bn, bl) in RESNET_BLOCKS.items():
        if bn == bottleneck and bl == blocks:
            arch = name
    if arch is None:
        raise ConvertError("%s: backbone with %s blocks %s is not resnet18/34/50/101" %
                           (path, "bottleneck" if bottleneck else "basic", list(blocks)))

    def level_of(channels, what):
        for level in (3, 4, 5):
            if level_channels(arch, level) == channels:
                return level
        raise ConvertError("%s: %s reads %d channels, not a level of %s" % (path, what, channels, arch))

    cfg = {
        "backbone": arch,
        "hidden_dim": int(d),
        "nheads": int(getattr(args, "nheads", 8) or 8),
        "dim_feedforward": int(need("letr.transformer.decoder.layers.0.linear1.weight").shape[0]),
        "coarse_enc_layers": count_layers(tensors, "letr.transformer.encoder.layers."),
        "coarse_dec_layers": count_layers(tensors, "letr.transformer.decoder.layers."),
        "num_queries": int(num_queries),
        "num_classes": int(need("letr.class_embed.weight").shape[0]) - 1,
        "dropout": float(getattr(args, "dropout", 0.1) if args is not None else 0.1),
        "stages": "coarse+fine" if two_stage else "coarse",
        "coarse_level": level_of(int(need("letr.input_proj.weight").shape[1]), "letr.input_proj"),
        "fine_level": 4,
        "fine_enc_layers": 0,
        "fine_dec_layers": 1,
        "short_side": int(short_side),
        "max_long_side": int(max_long_side),
        "mean": LETR_MEAN,
        "std": LETR_STD,
    }
    if two_stage:
        cfg["fine_level"] = level_of(int(need("input_proj.weight").shape[1]), "input_proj")
        cfg["fine_enc_layers"] = count_layers(tensors, "transformer.encoder.layers.")
        cfg["fine_dec_layers"] = count_layers(tensors, "transformer.decoder.layers.")
    else:
        cfg["fine_enc_layers"] = cfg["coarse_enc_layers"]
        cfg["fine_dec_layers"] = cfg["coarse_dec_layers"]
    if d % cfg["nheads"] != 0:
        raise ConvertError("%s: hidden_dim %d is not divisible by args.nheads %d" % (path, d, cfg["nheads"]))

    warnings = []
    if args is not None:
        for a, key in (("hidden_dim", "hidden_dim"), ("num_queries", "num_queries"),
                       ("dim_feedforward", "dim_feedforward"), ("backbone", "backbone")):
            if hasattr(args, a) and getattr(args, a) != cfg[key]:
                warnings.append("args.%s = %r but the tensors say %r (using the tensors)" %
                                (a, getattr(args, a), cfg[key]))
        if hasattr(args, "enc_layers") and args.enc_layers != cfg["coarse_enc_layers"]:
            warnings.append("args.enc_layers = %r but the coarse encoder has %d layers" %
                            (args.enc_layers, cfg["coarse_enc_layers"]))
        if hasattr(args, "dec_layers") and args.dec_layers != cfg["coarse_dec_layers"]:
            warnings.append("args.dec_layers = %r but the coarse decoder has %d layers" %
                            (args.dec_layers, cfg["coarse_dec_layers"]))
    return cfg, warnings


def check_tensors(tensors, cfg, path):
    expected = letr_tensors(cfg)
    missing = sorted(set(expected) - set(tensors))
    unknown = sorted(set(tensors) - set(expected))
    wrong = sorted(n for n in set(expected) & set(tensors) if tuple(tensors[n].shape) != tuple(expected[n]))
    if missing or unknown or wrong:
        lines = ["%s does not match a LETR %s model (%d missing, %d unknown, %d wrong shape):" %
                 (path, cfg["backbone"], len(missing), len(unknown), len(wrong))]
        lines += ["  missing %s %s" % (n, list(expected[n])) for n in missing]
        lines += ["  unknown %s %s" % (n, list(tensors[n].shape)) for n in unknown]
        lines += ["  wrong shape %s: %s, expected %s" % (n, list(tensors[n].shape), list(expected[n]))
                  for n in wrong]
        raise ConvertError("\n".join(lines))


def convert(in_path, out_path, short_side, max_long_side):
    ck = torch_load(in_path)
    args = None
    if isinstance(ck, dict) and "model" in ck:
        sd = ck["model"]
        args = ck.get("args")
    elif isinstance(ck, dict) and all(torch.is_tensor(v) for v in ck.values()):
        sd = ck
    else:
        raise ConvertError("%s: expected a dict with a 'model' state dict (an official LETR checkpoint)" % in_path)
    if not isinstance(sd, dict):
        raise ConvertError("%s: 'model' is not a state dict" % in_path)
    tensors, two_stage, notes = normalize_names(sd, in_path)
    cfg, warnings = derive_config(tensors, two_stage, args, in_path, short_side, max_long_side)
    check_tensors(tensors, cfg, in_path)
    write_checkpoint(out_path, "letr", cfg, tensors)
    dropped = [k for k in ck if k != "model"] if isinstance(ck, dict) and "model" in ck else []
    for w in warnings:
        print("convert_letr.py: warning: " + w, file=sys.stderr)
    print("%s -> %s: LETR %s, %s, %d tensors%s%s" % (
        in_path, out_path, cfg["backbone"], cfg["stages"], len(tensors),
        ("; " + "; ".join(notes)) if notes else "",
        ("; dropped " + ", ".join(dropped)) if dropped else ""))
    return cfg


# ---------------------------------------------------------------------------------------------
# Random torchvision ResNet + reference features

def random_torchvision_resnet(arch, seed, input_size):
    """torchvision `arch` with random weights and randomised batch-norm statistics (eval mode).
    Returns (model, generator) with the generator positioned after the initialisation."""
    import torchvision

    if arch not in RESNET_BLOCKS:
        raise ConvertError("unknown ResNet arch '%s' (resnet18, resnet34, resnet50, resnet101)" % arch)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    ctor = getattr(torchvision.models, arch)
    try:
        model = ctor(weights=None)
    except TypeError:  # torchvision < 0.13
        model = ctor(pretrained=False)
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    with torch.no_grad():
        for bn in bns:
            bn.weight.copy_(torch.rand(bn.weight.shape, generator=gen) + 0.5)
            bn.bias.copy_(torch.randn(bn.bias.shape, generator=gen) * 0.1)
        # Batch-norm statistics: those of a random calibration batch (momentum 1 keeps the
        # last batch), perturbed, so that activations stay O(1) and every buffer matters. Each
        # variance is raised by its layer's mean variance: near-constant channels would
        # otherwise get huge gains that amplify float32 rounding (~1e-3 at C5 instead of ~1e-6).
        for bn in bns:
            bn.momentum = 1.0
        model.train()
        model(torch.randn(2, 3, input_size[0], input_size[1], generator=gen))
        for bn in bns:
            bn.running_mean.add_(torch.randn(bn.running_mean.shape, generator=gen) * 0.05)
            bn.running_var.mul_(torch.rand(bn.running_var.shape, generator=gen) * 0.4 + 0.8)
            bn.running_var.add_(bn.running_var.mean())
    model.eval()
    return model, gen


def resnet_random(arch, seed, out_path, features_out, input_size):
    model, gen = random_torchvision_resnet(arch, seed, input_size)
    x = torch.randn(1, 3, input_size[0], input_size[1], generator=gen)
    feats = {}
    with torch.no_grad():
        y = model.maxpool(model.relu(model.bn1(model.conv1(x))))
        for level, layer in zip((2, 3, 4, 5), (model.layer1, model.layer2, model.layer3, model.layer4)):
            y = layer(y)
            feats["c%d" % level] = y.clone()

    tensors = {k: v for k, v in model.state_dict().items()
               if not k.startswith("fc.") and not k.endswith("num_batches_tracked")}
    expected = resnet_tensors(arch)
    if set(tensors) != set(expected):
        raise ConvertError("internal: torchvision %s names differ from Glimpse's: %s" %
                           (arch, sorted(set(tensors) ^ set(expected))[:10]))
    write_checkpoint(out_path, "resnet", {"arch": arch}, tensors)
    feats["input"] = x
    write_trace(features_out, "resnet", {"arch": arch, "seed": seed, "torch": torch.__version__}, feats)
    print("%s (seed %d) -> %s, features %s" % (arch, seed, out_path, features_out))


def parse_size(text):
    m = re.fullmatch(r"(\d+)x(\d+)", text)
    if not m:
        raise ConvertError("--input-size: expected HxW, got '%s'" % text)
    return int(m.group(1)), int(m.group(2))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("inputs", nargs="*", help="official LETR checkpoint(s) (.pth)")
    p.add_argument("--out", required=True, help="Glimpse checkpoint to write (.h5); a folder for several inputs")
    p.add_argument("--short-side", type=int, default=512, help="config short_side (default 512)")
    p.add_argument("--max-long-side", type=int, default=1333, help="config max_long_side (default 1333)")
    p.add_argument("--resnet-random", metavar="ARCH", help="write a random torchvision ResNet instead")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--features-out", help="with --resnet-random: reference features file (.h5)")
    p.add_argument("--input-size", default="64x96", help="with --resnet-random: input HxW (default 64x96)")
    a = p.parse_args(argv)

    def fail(msg):
        print("convert_letr.py: " + msg, file=sys.stderr)

    try:
        if a.resnet_random:
            if a.inputs:
                raise ConvertError("--resnet-random takes no input checkpoint")
            if not a.features_out:
                raise ConvertError("--resnet-random needs --features-out F.h5")
            size = parse_size(a.input_size)
            load_modules()
            resnet_random(a.resnet_random, a.seed, a.out, a.features_out, size)
            return 0
        if not a.inputs:
            raise ConvertError("no input checkpoint given (see --help)")
        jobs = [(a.inputs[0], a.out)]
        if len(a.inputs) > 1:
            os.makedirs(a.out, exist_ok=True)
            jobs = [(i, os.path.join(a.out, os.path.splitext(os.path.basename(i))[0] + ".h5")) for i in a.inputs]
    except ConvertError as e:
        fail(str(e))
        return 1
    failed = 0
    for src, dst in jobs:
        try:
            if not os.path.isfile(src):
                raise ConvertError("%s: no such file" % src)
            load_modules()
            convert(src, dst, a.short_side, a.max_long_side)
        except ConvertError as e:
            fail(str(e))
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
