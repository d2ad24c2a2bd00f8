#!/usr/bin/python3
"""Convert official ConstellationNet checkpoints (mlpc-ucsd/ConstellationNet, Conv-4 and ResNet-12
Y-branch models) to Glimpse's HDF5 checkpoint format (family "constellation").

Run with Debian's python3 (python3-torch, python3-h5py):

  convert_constellation.py IN.pth --out OUT.h5 [--image-size 84] [--heads 8] [--classes LIST.txt]
  convert_constellation.py IN1.pth IN2.pth ... --out DIR     (each to DIR/<name>.h5; failures
                                                              are reported, the others converted)

Input: the official training script's file ({'model_sd': state_dict, 'model_args': {...},
'config', 'training', ...}), or a dict holding a state dict under 'model_sd', 'state_dict' or
'model', or a bare state dict; 'module.' prefixes are dropped. Glimpse's parameter names are the
official ones (encoder.{stem,branch1,branch2}.<block>.{conv,feat_cluster,transformer.layers.0,
merge,bn}.* for Conv-4; ...{mergeblockN,bnN,downsample}.* for ResNet-12; classifier.linear.*,
temp), so tensors keep their names and dtypes (V_count_buffer float64, num_batches_tracked int64,
the rest float32).

The config is derived from the tensors: the backbone (mergeblock names: ResNet-12), the widths
(the official defaults are Conv-4 64,64,42,42 and ResNet-12 64,128,256,290), which conv layers
have a clustering module (feat_cluster) and which a relation module (transformer), the cluster
count, the base classes; the stem of 2 blocks makes it multi-branch (Y-shape). From 'model_args'
when the file has them: the attention heads (self_attention_kwargs.multi_head; else --heads,
default 8) and the soft-assignment inverse temperature (feat_cluster_kwargs.K; else 100); they
are checked against what Glimpse implements (embedding_size = the cluster count, post-norm, sine
positional encoding, one relation layer). Input normalization: ImageNet's mean and std, as the
official data loaders; --image-size (default 84, mini-ImageNet's; CIFAR-FS/FC100 models: 32).

The official classifier keeps side-out classifiers (sideout_classifiers.*, one linear head per
side output used as an auxiliary loss in training); no output Glimpse computes reads them: they
are dropped and named in the report. A file without the learnable scale `temp` (the official
'classifier-sideout' model) gets temp = 10 (the official initial value), said in the report.
Anything else unknown, missing or misshapen is refused with a list of the names, and nothing is
written.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import convert_letr as cl  # noqa: E402  (HDF5 writing and .pth reading are shared)

ConvertError = cl.ConvertError
IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]
STAGES = ("stem", "branch1", "branch2")


def expected_tensors(cfg):
    """name -> (shape, dtype name) of every tensor Glimpse's ConstellationModel has for `cfg`
    (mirrors core/models/constellation/model.cpp)."""
    out = {}
    resnet = cfg["backbone"] == "resnet12"
    ch = cfg["channels"]
    K = cfg["clusters"]
    per = 3 if resnet else 1

    def bn(p, c):
        for n in ("weight", "bias", "running_mean", "running_var"):
            out["%s.%s" % (p, n)] = ((c,), "float32")
        out[p + ".num_batches_tracked"] = ((), "int64")

    def linear(p, i, o):
        out[p + ".weight"] = ((o, i), "float32")
        out[p + ".bias"] = ((o,), "float32")

    def unit(p, cin, cout, layer, constellation, with_bn):
        out[p + ".conv.weight"] = ((cout, cin, 3, 3), "float32")
        if constellation and layer in cfg["cluster_layers"]:
            out[p + ".feat_cluster.V_buffer"] = ((K, cout), "float32")
            out[p + ".feat_cluster.V_count_buffer"] = ((K,), "float64")
            if layer in cfg["relation_layers"]:
                t = p + ".transformer.layers.0"
                for n in ("linear_v", "linear_k", "linear_q", "linear_merge"):
                    linear(t + ".mhatt." + n, K, K)
                for n in ("norm1", "norm2"):
                    out[t + "." + n + ".weight"] = ((K,), "float32")
                    out[t + "." + n + ".bias"] = ((K,), "float32")
                linear(t + ".linear1", K, K)
                linear(t + ".linear2", K, K)
            out[p + ".merge.weight"] = ((cout, cout + K, 1, 1), "float32")
        if with_bn:
            bn(p + ".bn", cout)

    split = 2 if cfg["multi_branch"] else 0
    stages = [("stem", 0, split, cfg["constellation"]), ("branch1", split, 4, cfg["constellation"])]
    if cfg["multi_branch"]:
        stages.append(("branch2", split, 4, False))
    for stage, first, last, constellation in stages:
        for b in range(first, last):
            cin = 3 if b == 0 else ch[b - 1]
            p = "encoder.%s.%d" % (stage, b - first)
            if not resnet:
                unit(p, cin, ch[b], b + 1, constellation, True)
                continue
            for j in range(3):
                unit("%s.mergeblock%d" % (p, j + 1), cin if j == 0 else ch[b], ch[b], b * per + j + 1, constellation,
                     False)
                bn("%s.bn%d" % (p, j + 1), ch[b])
            out[p + ".downsample.0.weight"] = ((ch[b], cin, 1, 1), "float32")
            bn(p + ".downsample.1", ch[b])
    linear("classifier.linear", ch[3], cfg["num_classes"])
    out["temp"] = ((), "float32")
    return out


def read_state_dict(ck, path):
    torch = cl.torch
    args = None
    if isinstance(ck, dict) and isinstance(ck.get("model_sd"), dict):
        sd = ck["model_sd"]
        args = ck.get("model_args") if isinstance(ck.get("model_args"), dict) else None
    elif isinstance(ck, dict) and isinstance(ck.get("state_dict"), dict):
        sd = ck["state_dict"]
    elif isinstance(ck, dict) and isinstance(ck.get("model"), dict):
        sd = ck["model"]
    elif isinstance(ck, dict) and ck and all(torch.is_tensor(v) for v in ck.values()):
        sd = ck
    else:
        raise ConvertError("%s: expected a ConstellationNet checkpoint (a dict with 'model_sd') or a state dict" % path)
    tensors = {}
    for k, v in sd.items():
        if not torch.is_tensor(v):
            raise ConvertError("%s: entry '%s' is not a tensor" % (path, k))
        if k.startswith("module."):
            k = k[len("module."):]
        if k in tensors:
            raise ConvertError("%s: tensor '%s' appears twice" % (path, k))
        tensors[k] = v
    return tensors, args


def block_indices(t, stage):
    idx = set()
    for k in t:
        m = re.match(r"^encoder\.%s\.(\d+)\." % stage, k)
        if m:
            idx.add(int(m.group(1)))
    if idx and idx != set(range(max(idx) + 1)):
        raise ConvertError("encoder.%s has gaps in its block indices %s" % (stage, sorted(idx)))
    return len(idx)


def derive_config(t, args, path, heads_arg, image_size):
    def need(name):
        if name not in t:
            raise ConvertError("%s: missing %s (not a ConstellationNet checkpoint?)" % (path, name))
        return t[name]

    if any(re.match(r"^encoder\.\w+\.\d+\.mergeblock\d\.", k) for k in t):
        backbone = "resnet12"
    elif any(re.match(r"^encoder\.\w+\.\d+\.conv\.weight$", k) for k in t):
        backbone = "conv4"
    else:
        raise ConvertError("%s: no encoder.<stage>.<block>.conv / mergeblock tensors: not a ConstellationNet "
                           "Conv-4 or ResNet-12 checkpoint" % path)
    try:
        n = {s: block_indices(t, s) for s in STAGES}
    except ConvertError as e:
        raise ConvertError("%s: %s" % (path, e))
    if n["stem"] + n["branch1"] != 4:
        raise ConvertError("%s: the stem (%d blocks) and branch1 (%d blocks) make %d blocks, not 4"
                           % (path, n["stem"], n["branch1"], n["stem"] + n["branch1"]))
    if n["stem"] == 2:
        if n["branch2"] != 2:
            raise ConvertError("%s: a stem of 2 blocks needs a branch2 of 2 blocks, found %d" % (path, n["branch2"]))
        multi = True
    elif n["stem"] == 0 and n["branch2"] == 0:
        multi = False
    else:
        raise ConvertError("%s: a stem of %d blocks with a branch2 of %d: Glimpse's models are single-branch (no "
                           "stem, no branch2) or Y-shaped with the branches after block 2 (y_branch_stage 2)"
                           % (path, n["stem"], n["branch2"]))
    resnet = backbone == "resnet12"
    split = 2 if multi else 0

    def unit_prefix(b, j):   # block b (0..3) of stem/branch1, conv j (0-based)
        stage, i = ("stem", b) if b < split else ("branch1", b - split)
        p = "encoder.%s.%d" % (stage, i)
        return "%s.mergeblock%d" % (p, j + 1) if resnet else p

    per = 3 if resnet else 1
    channels, cluster_layers, relation_layers, K = [], [], [], None
    for b in range(4):
        channels.append(int(need(unit_prefix(b, 0) + ".conv.weight").shape[0]))
        for j in range(per):
            p = unit_prefix(b, j)
            layer = b * per + j + 1
            if p + ".feat_cluster.V_buffer" in t:
                cluster_layers.append(layer)
                k = int(t[p + ".feat_cluster.V_buffer"].shape[0])
                if K is not None and k != K:
                    raise ConvertError("%s: %s has %d clusters, an earlier module %d" % (path, p, k, K))
                K = k
                if p + ".transformer.layers.0.mhatt.linear_q.weight" in t:
                    relation_layers.append(layer)
    if multi:
        plain = [k for k in t if k.startswith("encoder.branch2.") and (".feat_cluster." in k or ".transformer." in k)]
        if plain:
            raise ConvertError("%s: branch2 has constellation modules (%s ...); Glimpse's branch 2 is plain convs, as in "
                               "the official Y-branch configs" % (path, plain[0]))
    extra_layers = [k for k in t if re.search(r"\.transformer\.layers\.[1-9]\d*\.", k)]
    if extra_layers:
        raise ConvertError("%s: %s: more than one relation layer per module (Glimpse implements one)"
                           % (path, extra_layers[0]))
    enc = (args or {}).get("encoder_args", {}) or {}
    sa = enc.get("self_attention_kwargs", {}) or {}
    fc = enc.get("feat_cluster_kwargs", {}) or {}
    heads = int(sa.get("multi_head", heads_arg))
    if sa.get("pre_normalize"):
        raise ConvertError("%s: self_attention_kwargs.pre_normalize is true; Glimpse's relation module is post-norm"
                           % path)
    if "positional_encoding" in sa and sa["positional_encoding"] != "sine_pe":
        raise ConvertError("%s: positional_encoding %r; Glimpse adds the sine encoding ('sine_pe')"
                           % (path, sa["positional_encoding"]))
    if K is not None and "embedding_size" in sa and relation_layers and int(sa["embedding_size"]) != K:
        raise ConvertError("%s: self_attention_kwargs.embedding_size %s differs from the %d clusters (Glimpse's relation "
                           "works on the cluster similarity map)" % (path, sa["embedding_size"], K))
    if K is not None and relation_layers and K % heads:
        raise ConvertError("%s: %d clusters do not divide into %d heads (--heads)" % (path, K, heads))
    num_classes = int(need("classifier.linear.weight").shape[0])
    cfg = {
        "backbone": backbone, "channels": channels, "constellation": bool(cluster_layers),
        "multi_branch": multi, "clusters": K if K is not None else 64,
        "beta": float(fc.get("K", 100.0)), "lambda": 1.0, "heads": heads, "dropout": 0.1,
        "drop_block": 0.0, "drop_block_size": 2, "num_classes": num_classes, "image_size": image_size,
        "mean": IMAGENET_MEAN, "std": IMAGENET_STD, "test_weights": [4, 3, 2, 1], "feature_augment": True,
    }
    if cluster_layers:
        cfg["cluster_layers"] = cluster_layers
        cfg["relation_layers"] = relation_layers
    return cfg


def check_tensors(tensors, cfg, path):
    """Refuses missing, unknown and misshapen tensors (side-out classifiers and a missing temp
    excepted); returns (dropped side-out names, whether temp was added)."""
    exp = expected_tensors(cfg)
    sideout = sorted(k for k in tensors if k.startswith("sideout_classifiers."))
    problems = []
    for k in sorted(set(exp) - set(tensors)):
        if k != "temp":
            problems.append("missing " + k)
    for k in sorted(set(tensors) - set(exp) - set(sideout)):
        problems.append("unknown " + k)
    for k in sorted(set(exp) & set(tensors)):
        if tuple(tensors[k].shape) != tuple(exp[k][0]):
            problems.append("wrong shape %s %s (expected %s)" % (k, tuple(tensors[k].shape), tuple(exp[k][0])))
    if problems:
        more = "" if len(problems) <= 20 else "; ... (%d more)" % (len(problems) - 20)
        raise ConvertError("%s: not a ConstellationNet checkpoint Glimpse can load: %s%s"
                           % (path, "; ".join(problems[:20]), more))
    return sideout, "temp" not in tensors


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


def write_checkpoint(path, cfg, tensors, dtypes):
    """Glimpse's checkpoint layout (convert_letr.write_checkpoint) with each tensor's dtype kept."""
    torch, h5py, np = cl.torch, cl.h5py, cl.np
    conv = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64}
    import json

    def fill(f):
        f.attrs["kind"] = cl.fixed_string("glimpse.checkpoint")
        f.attrs["format_version"] = np.int64(cl.FORMAT_VERSION)
        meta = f.create_group("meta")
        meta.attrs["family"] = cl.fixed_string("constellation")
        meta.attrs["config"] = cl.fixed_string(json.dumps(cfg))
        meta.attrs["format_version"] = np.int64(cl.FORMAT_VERSION)
        params = f.create_group("params")
        for name in sorted(tensors):
            t = tensors[name].detach().cpu().to(conv[dtypes[name]]).contiguous()
            cl.checked_dataset(params, name, t.numpy())

    cl.write_h5_atomically(path, fill)


def convert(in_path, out_path, heads, image_size, classes):
    torch = cl.torch
    ck = cl.torch_load(in_path)
    tensors, args = read_state_dict(ck, in_path)
    cfg = derive_config(tensors, args, in_path, heads, image_size)
    sideout, add_temp = check_tensors(tensors, cfg, in_path)
    notes = []
    for k in sideout:
        del tensors[k]
    if sideout:
        heads_n = sorted({k.split(".")[1] for k in sideout}, key=int)
        notes.append("%d side-out classifiers dropped (auxiliary training heads no output reads): %s"
                     % (len(heads_n), ", ".join(sideout)))
    if add_temp:
        tensors["temp"] = torch.tensor(10.0)
        notes.append("no 'temp' in the file: temp = 10 (the official initial value)")
    if classes:
        cfg["class_names"] = read_classes(classes, cfg["num_classes"])
    exp = expected_tensors(cfg)
    write_checkpoint(out_path, cfg, tensors, {k: exp[k][1] for k in tensors})
    desc = "%s%s" % ("ResNet-12" if cfg["backbone"] == "resnet12" else "Conv-4",
                     " (multi-branch)" if cfg["multi_branch"] else "")
    print("%s -> %s: ConstellationNet %s, channels %s, %d clusters in layers %s (relation %s), %d heads, %d classes, "
          "%d tensors%s" % (in_path, out_path, desc, cfg["channels"], cfg["clusters"], cfg.get("cluster_layers", []),
                            cfg.get("relation_layers", []), cfg["heads"], cfg["num_classes"], len(tensors),
                            ("; " + "; ".join(notes)) if notes else ""))
    return cfg


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("inputs", nargs="+", help="ConstellationNet checkpoint(s) (.pth)")
    p.add_argument("--out", required=True, help="Glimpse checkpoint to write (.h5); a folder for several inputs")
    p.add_argument("--heads", type=int, default=8, help="attention heads when the file has no model_args (default 8)")
    p.add_argument("--image-size", type=int, default=84, help="config image_size (default 84, mini-ImageNet)")
    p.add_argument("--classes", help="base class names, one per line, in index order")
    a = p.parse_args(argv)
    if a.heads < 1 or not 16 <= a.image_size <= 1024:
        print("convert_constellation.py: --heads must be positive and --image-size in 16..1024", file=sys.stderr)
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
            convert(src, dst, a.heads, a.image_size, a.classes)
        except ConvertError as e:
            print("convert_constellation.py: " + str(e), file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
