#!/usr/bin/python3
"""Convert CoaT / CoaT-Lite checkpoints (timm's coat.py or the official release) to Glimpse's
HDF5 checkpoint format (family "coat").

Run with Debian's python3 (python3-torch, python3-h5py):

  convert_coat.py IN.pth --out OUT.h5 [--num-heads 8] [--image-size 224] [--classes LIST.txt]
                  [--co-scale feature_interpolation|direct_cross_layer_attention]
  convert_coat.py IN1.pth IN2.pth ... --out DIR     (each to DIR/<name>.h5; failures are
                                                     reported and the others still converted)

Input: a state dict with timm's names, or a dict holding it under 'model' (official files) or
'state_dict'; 'module.' prefixes are dropped. timm's state dicts repeat the modules a scale
shares under every user: serial_blocks{s}.{i}.cpe.* (= cpe{s}.*),
*.factoratt_crpe*.crpe.conv_list.* (= crpe{s}.conv_list.*) and parallel_blocks.{i}.mlp3/mlp4.*
(= mlp2.*); each copy must equal the canonical tensor and is dropped.
The config (embed dims, depths, parallel depth, MLP ratios, CRPE kernels and head split,
use_cpe/use_crpe, classes) is derived from the tensor shapes; the head count cannot be
(default 8, --num-heads). Class names: --classes (one per line), by default Glimpse's
ImageNet-1k list (resources/imagenet_classes.txt) for 1000-class heads.
The official CoaT code (mlpc-ucsd/CoaT) creates the final norms norm1-norm4 of every scale
whatever the variant, but the classifier reads only norm4 (CoaT-Lite) or norm2-norm4 (CoaT), so
official files carry norm1-norm3 (CoaT-Lite) or norm1 (CoaT) that no output depends on (timm
does not create them). Those unused final norms are checked for shape, dropped and named in
the report. Any other unknown, missing or misshapen tensor is refused with a list of names.

Glimpse HDF5 checkpoint layout (docs/formats.md): root attributes kind = "glimpse.checkpoint",
format_version = 1; group /meta with attributes family, config (JSON string),
format_version; /params/<pytorch name> one float32 dataset per parameter.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import convert_letr as cl  # noqa: E402  (HDF5 writing and .pth reading are shared)

ConvertError = cl.ConvertError
HERE = os.path.dirname(os.path.abspath(__file__))
CLASS_LISTS = [os.path.join(HERE, "..", "resources", "imagenet_classes.txt"),
               os.path.join(HERE, "..", "imagenet_classes.txt"),      # share/glimpse/ in the .deb
               "/usr/share/glimpse/imagenet_classes.txt"]

PRESETS = {
    "coat_lite_tiny": ([64, 128, 256, 320], [2, 2, 2, 2], 0, [8, 8, 4, 4]),
    "coat_lite_mini": ([64, 128, 320, 512], [2, 2, 2, 2], 0, [8, 8, 4, 4]),
    "coat_lite_small": ([64, 128, 320, 512], [3, 4, 6, 3], 0, [8, 8, 4, 4]),
    "coat_lite_medium": ([128, 256, 320, 512], [3, 6, 10, 8], 0, [4, 4, 4, 4]),
    "coat_tiny": ([152, 152, 152, 152], [2, 2, 2, 2], 6, [4, 4, 4, 4]),
    "coat_mini": ([152, 216, 216, 216], [2, 2, 2, 2], 6, [4, 4, 4, 4]),
    "coat_small": ([152, 320, 320, 320], [2, 2, 2, 2], 6, [4, 4, 4, 4]),
}


def expected_tensors(cfg):
    """name -> shape of every parameter Glimpse's CoatModel has (mirrors core/models/coat/model.cpp)."""
    out = {}
    d = cfg["embed_dims"]
    heads = cfg["num_heads"]

    def linear(p, i, o):
        out[p + ".weight"] = (o, i)
        out[p + ".bias"] = (o,)

    def norm(p, c):
        out[p + ".weight"] = (c,)
        out[p + ".bias"] = (c,)

    def attn(p, c):
        linear(p + ".qkv", c, 3 * c)
        linear(p + ".proj", c, c)

    def mlp(p, c, ratio):
        h = int(c * ratio)
        linear(p + ".fc1", c, h)
        linear(p + ".fc2", h, c)

    for s in range(4):
        n = str(s + 1)
        cin = cfg["in_chans"] if s == 0 else d[s - 1]
        k = 4 if s == 0 else 2
        out["patch_embed%s.proj.weight" % n] = (d[s], cin, k, k)
        out["patch_embed%s.proj.bias" % n] = (d[s],)
        norm("patch_embed%s.norm" % n, d[s])
        out["cls_token" + n] = (1, 1, d[s])
        if cfg["use_cpe"]:
            out["cpe%s.proj.weight" % n] = (d[s], 1, 3, 3)
            out["cpe%s.proj.bias" % n] = (d[s],)
        if cfg["use_crpe"]:
            ch = d[s] // heads
            for g, (kern, nh) in enumerate(cfg["crpe_window"]):
                out["crpe%s.conv_list.%d.weight" % (n, g)] = (nh * ch, 1, kern, kern)
                out["crpe%s.conv_list.%d.bias" % (n, g)] = (nh * ch,)
        for i in range(cfg["serial_depths"][s]):
            p = "serial_blocks%s.%d" % (n, i)
            norm(p + ".norm1", d[s])
            attn(p + ".factoratt_crpe", d[s])
            norm(p + ".norm2", d[s])
            mlp(p + ".mlp", d[s], cfg["mlp_ratios"][s])
    for i in range(cfg["parallel_depth"]):
        p = "parallel_blocks.%d" % i
        for s in (2, 3, 4):
            norm("%s.norm1%d" % (p, s), d[s - 1])
            attn("%s.factoratt_crpe%d" % (p, s), d[s - 1])
            norm("%s.norm2%d" % (p, s), d[s - 1])
        mlp(p + ".mlp2", d[1], cfg["mlp_ratios"][1])
    if cfg["parallel_depth"] > 0:
        norm("norm2", d[1])
        norm("norm3", d[2])
        out["aggregate.weight"] = (1, 3, 1)
        out["aggregate.bias"] = (1,)
    norm("norm4", d[3])
    linear("head", d[3], cfg["num_classes"])
    return out


ALIASES = [
    # (pattern of a repeated copy, canonical name built from its groups)
    (re.compile(r"^serial_blocks(\d)\.\d+\.cpe\.(.*)$"), lambda m: "cpe%s.%s" % (m.group(1), m.group(2))),
    (re.compile(r"^serial_blocks(\d)\.\d+\.factoratt_crpe\.crpe\.(.*)$"),
     lambda m: "crpe%s.%s" % (m.group(1), m.group(2))),
    (re.compile(r"^parallel_blocks\.\d+\.factoratt_crpe(\d)\.crpe\.(.*)$"),
     lambda m: "crpe%s.%s" % (m.group(1), m.group(2))),
    (re.compile(r"^(parallel_blocks\.\d+)\.mlp[34]\.(.*)$"), lambda m: "%s.mlp2.%s" % (m.group(1), m.group(2))),
]


def normalize_names(sd, path):
    """timm/official names -> Glimpse names (shared copies folded). Returns (tensors, notes)."""
    torch = cl.torch
    src = {}
    for k, v in sd.items():
        if not torch.is_tensor(v):
            raise ConvertError("%s: entry '%s' is not a tensor" % (path, k))
        if k.startswith("module."):
            k = k[len("module."):]
        if k in src:
            raise ConvertError("%s: tensor '%s' appears twice" % (path, k))
        src[k] = v
    tensors, copies = {}, {}
    for k, v in src.items():
        canon = None
        for pat, fn in ALIASES:
            m = pat.match(k)
            if m:
                canon = fn(m)
                break
        if canon is None:
            tensors[k] = v
        else:
            copies.setdefault(canon, []).append((k, v))
    for canon, lst in sorted(copies.items()):
        ref = tensors.get(canon)
        if ref is None:
            ref = lst[0][1]
            tensors[canon] = ref
        for k, v in lst:
            if v.shape != ref.shape or not torch.equal(v, ref):
                raise ConvertError("%s: %s differs from %s (shared modules must be equal)" % (path, k, canon))
    notes = []
    n = sum(len(v) for v in copies.values())
    if n:
        notes.append("%d repeated copies of shared modules dropped" % n)
    return tensors, notes


def derive_config(t, path, num_heads, image_size, co_scale):
    def need(name):
        if name not in t:
            raise ConvertError("%s: missing %s (not a CoaT checkpoint?)" % (path, name))
        return t[name]

    dims = [int(need("patch_embed%d.proj.weight" % (s + 1)).shape[0]) for s in range(4)]
    in_chans = int(need("patch_embed1.proj.weight").shape[1])

    def count(prefix):
        idx = set()
        for k in t:
            m = re.match(re.escape(prefix) + r"\.(\d+)\.", k)
            if m:
                idx.add(int(m.group(1)))
        if idx and idx != set(range(max(idx) + 1)):
            raise ConvertError("%s: %s has gaps in its block indices %s" % (path, prefix, sorted(idx)))
        return len(idx)

    serial = [count("serial_blocks%d" % (s + 1)) for s in range(4)]
    if min(serial) < 1:
        raise ConvertError("%s: every scale needs at least one serial block, found %s" % (path, serial))
    parallel = count("parallel_blocks")
    ratios = []
    for s in range(4):
        h = int(need("serial_blocks%d.0.mlp.fc1.weight" % (s + 1)).shape[0])
        r = h / dims[s]
        ratios.append(int(r) if r == int(r) else r)
    for s in range(4):
        if dims[s] % num_heads:
            raise ConvertError("%s: embed dim %d is not divisible by --num-heads %d" % (path, dims[s], num_heads))
    use_cpe = "cpe1.proj.weight" in t
    use_crpe = "crpe1.conv_list.0.weight" in t
    window = []
    if use_crpe:
        ch = dims[0] // num_heads
        g = 0
        while "crpe1.conv_list.%d.weight" % g in t:
            w = t["crpe1.conv_list.%d.weight" % g]
            if w.dim() != 4 or w.shape[0] % ch:
                raise ConvertError("%s: crpe1.conv_list.%d.weight has shape %s, not [heads*%d, 1, k, k]"
                                   % (path, g, tuple(w.shape), ch))
            window.append([int(w.shape[-1]), int(w.shape[0]) // ch])
            g += 1
        if sum(n for _, n in window) != num_heads:
            raise ConvertError("%s: CRPE head split %s does not sum to --num-heads %d" % (path, window, num_heads))
    else:
        window = [[3, 2], [5, 3], [7, 3]]
    num_classes = int(need("head.weight").shape[0])
    variant = "custom"
    for name, (pd, ps, pp, pr) in PRESETS.items():
        if pd == dims and ps == serial and pp == parallel and pr == ratios and num_heads == 8 \
                and use_cpe and use_crpe and window == [[3, 2], [5, 3], [7, 3]]:
            variant = name
    cfg = {
        "variant": variant, "embed_dims": dims, "serial_depths": serial, "parallel_depth": parallel,
        "num_heads": num_heads, "mlp_ratios": ratios, "crpe_window": window,
        "use_crpe": use_crpe, "use_cpe": use_cpe, "co_scale": co_scale, "num_classes": num_classes,
        "in_chans": in_chans, "image_size": image_size, "resize": image_size * 8 // 7,
        "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225],
    }
    return cfg


def unused_final_norms(cfg):
    """name -> shape of the final norms the official code creates but the classifier never reads:
    norm1-norm3 for CoaT-Lite (it classifies from norm4 alone), norm1 for CoaT (norm2-norm4 feed
    the aggregation). normN normalizes scale N, so its shape is (embed_dims[N-1],)."""
    used = (2, 3, 4) if cfg["parallel_depth"] > 0 else (4,)
    out = {}
    for n in (1, 2, 3, 4):
        if n not in used:
            for part in ("weight", "bias"):
                out["norm%d.%s" % (n, part)] = (cfg["embed_dims"][n - 1],)
    return out


def check_tensors(tensors, cfg, path):
    """Refuses missing, unknown and misshapen tensors; returns the sorted names of the unused
    final norms present (to be dropped)."""
    exp = expected_tensors(cfg)
    unused = unused_final_norms(cfg)
    allowed = dict(exp, **unused)
    problems = []
    for k in sorted(set(exp) - set(tensors)):
        problems.append("missing " + k)
    for k in sorted(set(tensors) - set(allowed)):
        problems.append("unknown " + k)
    for k in sorted(set(allowed) & set(tensors)):
        if tuple(tensors[k].shape) != tuple(allowed[k]):
            problems.append("wrong shape %s %s (expected %s)" % (k, tuple(tensors[k].shape), tuple(allowed[k])))
    if problems:
        more = "" if len(problems) <= 20 else "; ... (%d more)" % (len(problems) - 20)
        raise ConvertError("%s: not a CoaT checkpoint Glimpse can load: %s%s" % (path, "; ".join(problems[:20]), more))
    return sorted(set(unused) & set(tensors))


def read_classes(path, n):
    try:
        with open(path, encoding="utf-8") as f:
            names = [line.rstrip("\r\n") for line in f]
    except OSError as e:
        raise ConvertError("%s: cannot read the class list (%s)" % (path, e))
    while names and names[-1] == "":
        names.pop()
    if len(names) != n or any(not x for x in names):
        raise ConvertError("%s: expected %d non-empty class names, found %d lines" % (path, n, len(names)))
    return names


def convert(in_path, out_path, num_heads, image_size, co_scale, classes):
    torch = cl.torch
    ck = cl.torch_load(in_path)
    if isinstance(ck, dict) and "model" in ck and isinstance(ck["model"], dict):
        sd = ck["model"]
    elif isinstance(ck, dict) and "state_dict" in ck and isinstance(ck["state_dict"], dict):
        sd = ck["state_dict"]
    elif isinstance(ck, dict) and ck and all(torch.is_tensor(v) for v in ck.values()):
        sd = ck
    else:
        raise ConvertError("%s: expected a CoaT state dict, or a dict holding one under 'model'" % in_path)
    tensors, notes = normalize_names(sd, in_path)
    cfg = derive_config(tensors, in_path, num_heads, image_size, co_scale)
    dropped = check_tensors(tensors, cfg, in_path)
    if dropped:
        for k in dropped:
            del tensors[k]
        notes.append("unused final norms dropped (the classifier does not read them): " + ", ".join(dropped))
    if classes:
        cfg["class_names"] = read_classes(classes, cfg["num_classes"])
    elif cfg["num_classes"] == 1000:
        for c in CLASS_LISTS:
            if os.path.isfile(c):
                cfg["class_names"] = read_classes(c, 1000)
                notes.append("ImageNet-1k class names from " + os.path.normpath(c))
                break
    cl.write_checkpoint(out_path, "coat", cfg, tensors)
    print("%s -> %s: CoaT %s, dims %s, %d parallel groups, %d tensors%s" % (
        in_path, out_path, cfg["variant"], cfg["embed_dims"], cfg["parallel_depth"], len(tensors),
        ("; " + "; ".join(notes)) if notes else ""))
    return cfg


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("inputs", nargs="+", help="CoaT checkpoint(s) (.pth)")
    p.add_argument("--out", required=True, help="Glimpse checkpoint to write (.h5); a folder for several inputs")
    p.add_argument("--num-heads", type=int, default=8, help="attention heads (default 8, as every published CoaT)")
    p.add_argument("--image-size", type=int, default=224, help="config image_size (default 224)")
    p.add_argument("--co-scale", default="feature_interpolation",
                   choices=["feature_interpolation", "direct_cross_layer_attention"])
    p.add_argument("--classes", help="class names, one per line, in index order")
    a = p.parse_args(argv)
    if a.num_heads < 1:
        print("convert_coat.py: --num-heads must be positive", file=sys.stderr)
        return 2
    jobs = [(a.inputs[0], a.out)]
    if len(a.inputs) > 1:
        os.makedirs(a.out, exist_ok=True)
        jobs = [(i, os.path.join(a.out, os.path.splitext(os.path.basename(i))[0] + ".h5")) for i in a.inputs]
    failed = 0
    for src, dst in jobs:
        try:
            if not os.path.isfile(src):
                raise ConvertError("%s: no such file" % src)
            cl.load_modules()
            convert(src, dst, a.num_heads, a.image_size, a.co_scale, a.classes)
        except ConvertError as e:
            print("convert_coat.py: " + str(e), file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
