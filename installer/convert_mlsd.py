#!/usr/bin/python3
"""Convert an M-LSD tiny PyTorch state dict to Glimpse's HDF5 checkpoint format (family "mlsd").

Run with Debian's python3 (python3-torch, python3-h5py):

  convert_mlsd.py IN.pth --out OUT.h5 [--input-size 512] [--top-k 200] [--nms-kernel 3]
                  [--score-threshold 0.1] [--length-threshold 20]
  convert_mlsd.py IN1.pth IN2.pth ... --out DIR     (each to DIR/<name>.h5; failures are
                                                     reported and the others still converted)

Input: the state dict of the PyTorch port of M-LSD tiny (lhwcv/mlsd_pytorch,
models/mlsd_tiny_512_fp32.pth: MobileV2_MLSD_Tiny, converted from the official TFLite model),
bare or under 'model' / 'state_dict'; 'module.' prefixes are dropped. Every tensor is checked
against the layout Glimpse's MlsdTiny has (core/models/mlsd/model.h): the MobileNetV2 encoder
backbone.features.0-10 with a 4-channel stem, the decoder block12-block16. Anything else is
refused with a clear message: M-LSD large (block15-block23; Glimpse implements tiny only), a
model of that repository's training code (3-channel stem, an extra block17), a LETR or CoaT
checkpoint, a pickled module instead of a state dict, and any missing, unknown or misshapen
tensor (listed by name). BatchNorm's num_batches_tracked stays int64, as LibTorch has it.

The config (core/models/mlsd/config.h) holds the post-processing of the reference's
pred_lines: top_k centres after a nms_kernel max pool, kept when score > score_threshold and
length > length_threshold (centre-map pixels, half the input's).

Glimpse HDF5 checkpoint layout (docs/formats.md): root attributes kind = "glimpse.checkpoint",
format_version = 1; group /meta with attributes family, config (JSON string),
format_version; /params/<pytorch name> one dataset per parameter or buffer.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import convert_letr as cl  # noqa: E402  (HDF5 writing and .pth reading are shared)

ConvertError = cl.ConvertError

# MobileNetV2's (expansion, channels, repeats, first stride), the four rows M-LSD tiny keeps.
MBV2_ROWS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2)]


def expected_tensors():
    """name -> shape of every parameter and buffer of Glimpse's MlsdTiny."""
    out = {}

    def bn(p, c):
        for s in ("weight", "bias", "running_mean", "running_var"):
            out["%s.%s" % (p, s)] = (c,)
        out[p + ".num_batches_tracked"] = ()

    def conv(p, cin, cout, k, groups=1, bias=False):
        out[p + ".weight"] = (cout, cin // groups, k, k)
        if bias:
            out[p + ".bias"] = (cout,)

    def conv_bn(p, cin, cout, k, groups=1, bias=False):
        conv(p + ".0", cin, cout, k, groups, bias)
        bn(p + ".1", cout)

    f = "backbone.features."
    conv_bn(f + "0", 4, 32, 3)
    index, cin = 1, 32
    for t, c, n, _ in MBV2_ROWS:
        for _ in range(n):
            hidden = cin * t
            p = "%s%d.conv." % (f, index)
            j = 0
            if t != 1:
                conv_bn(p + "0", cin, hidden, 1)
                j = 1
            conv_bn(p + str(j), hidden, hidden, 3, groups=hidden)
            conv(p + str(j + 1), hidden, c, 1)
            bn(p + str(j + 2), c)
            index += 1
            cin = c

    def merge(p, in_a, in_b, out_a, out_b):
        conv_bn(p + ".conv1", in_b, out_b, 1, bias=True)
        conv_bn(p + ".conv2", in_a, out_a, 1, bias=True)

    def refine(p, cin, cout):
        conv_bn(p + ".conv1", cin, cin, 3, bias=True)
        conv_bn(p + ".conv2", cin, cout, 3, bias=True)

    merge("block12", 32, 64, 64, 64)
    refine("block13", 128, 64)
    merge("block14", 24, 64, 32, 32)
    refine("block15", 64, 64)
    conv_bn("block16.conv1", 64, 64, 3, bias=True)
    conv_bn("block16.conv2", 64, 64, 3, bias=True)
    conv("block16.conv3", 64, 16, 1, bias=True)
    return out


def recognise(tensors, path):
    """Refuses checkpoints of other models with a message saying what they are."""
    names = set(tensors)
    if any(k.startswith(("letr.", "transformer.", "query_embed.")) or ".body.layer" in k for k in names):
        raise ConvertError("%s: a LETR checkpoint, not M-LSD (convert it with installer/convert_letr.py)" % path)
    if any(k.startswith(("patch_embed", "serial_blocks", "parallel_blocks")) for k in names):
        raise ConvertError("%s: a CoaT checkpoint, not M-LSD (convert it with installer/convert_coat.py)" % path)
    if not any(k.startswith("backbone.features.") for k in names):
        raise ConvertError("%s: not an M-LSD state dict (no MobileNetV2 encoder backbone.features.*)" % path)
    if any(k.startswith(("block18.", "block20.", "block22.", "block23.")) for k in names):
        raise ConvertError("%s: an M-LSD large state dict (decoder block15-block23); Glimpse implements M-LSD "
                           "tiny only (models/mlsd_tiny_512_fp32.pth)" % path)
    stem = tensors.get("backbone.features.0.0.weight")
    if stem is not None and stem.dim() == 4 and stem.shape[1] == 3 and "block17.weight" in names:
        raise ConvertError("%s: a model of mlsd_pytorch's training code (3-channel stem, extra block17), not the "
                           "released M-LSD tiny layout (4-channel stem; models/mlsd_tiny_512_fp32.pth)" % path)


def check_tensors(tensors, path):
    expected = expected_tensors()
    missing = sorted(set(expected) - set(tensors))
    unknown = sorted(set(tensors) - set(expected))
    wrong = sorted(n for n in set(expected) & set(tensors) if tuple(tensors[n].shape) != tuple(expected[n]))
    if missing or unknown or wrong:
        lines = ["%s does not match M-LSD tiny (%d missing, %d unknown, %d wrong shape):" %
                 (path, len(missing), len(unknown), len(wrong))]
        lines += ["  missing %s %s" % (n, list(expected[n])) for n in missing[:20]]
        lines += ["  unknown %s %s" % (n, list(tensors[n].shape)) for n in unknown[:20]]
        lines += ["  wrong shape %s: %s, expected %s" % (n, list(tensors[n].shape), list(expected[n]))
                  for n in wrong[:20]]
        if max(len(missing), len(unknown), len(wrong)) > 20:
            lines.append("  ... (lists cut at 20 names each)")
        raise ConvertError("\n".join(lines))


def write_checkpoint(path, config, tensors):
    torch, np = cl.torch, cl.np

    def fill(f):
        f.attrs["kind"] = cl.fixed_string("glimpse.checkpoint")
        f.attrs["format_version"] = np.int64(cl.FORMAT_VERSION)
        meta = f.create_group("meta")
        meta.attrs["family"] = cl.fixed_string("mlsd")
        meta.attrs["config"] = cl.fixed_string(json.dumps(config))
        meta.attrs["format_version"] = np.int64(cl.FORMAT_VERSION)
        params = f.create_group("params")
        for name in sorted(tensors):
            t = tensors[name].detach().cpu()
            t = t.to(torch.int64) if name.endswith("num_batches_tracked") else t.to(torch.float32)
            cl.checked_dataset(params, name, t.contiguous().numpy())

    cl.write_h5_atomically(path, fill)


def make_config(a):
    return {"variant": "tiny", "input_size": a.input_size, "top_k": a.top_k, "nms_kernel": a.nms_kernel,
            "score_threshold": a.score_threshold, "length_threshold": a.length_threshold}


def convert(in_path, out_path, config):
    tensors = cl.plain_state_dict(cl.torch_load(in_path), in_path, "M-LSD")
    recognise(tensors, in_path)
    check_tensors(tensors, in_path)
    write_checkpoint(out_path, config, tensors)
    print("%s -> %s: M-LSD tiny, input %d, %d tensors" % (in_path, out_path, config["input_size"], len(tensors)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("inputs", nargs="+", help="M-LSD tiny state dict(s) (.pth)")
    p.add_argument("--out", required=True, help="Glimpse checkpoint to write (.h5); a folder for several inputs")
    p.add_argument("--input-size", type=int, default=512, help="network input side (default 512)")
    p.add_argument("--top-k", type=int, default=200, help="centre candidates (default 200)")
    p.add_argument("--nms-kernel", type=int, default=3, help="max-pool side of the centre suppression (default 3)")
    p.add_argument("--score-threshold", type=float, default=0.10, help="minimum centre score (default 0.1)")
    p.add_argument("--length-threshold", type=float, default=20.0,
                   help="minimum length in centre-map pixels (default 20 = 40 px of a 512 input)")
    a = p.parse_args(argv)
    problems = []
    if a.input_size < 32 or a.input_size % 32:
        problems.append("--input-size must be a positive multiple of 32")
    if a.top_k < 1:
        problems.append("--top-k must be positive")
    if a.nms_kernel < 1 or a.nms_kernel % 2 == 0:
        problems.append("--nms-kernel must be a positive odd number")
    if not 0 <= a.score_threshold < 1:
        problems.append("--score-threshold must be in [0, 1)")
    if a.length_threshold < 0:
        problems.append("--length-threshold must be >= 0")
    if problems:
        print("convert_mlsd.py: " + "; ".join(problems), file=sys.stderr)
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
            convert(src, dst, make_config(a))
        except ConvertError as e:
            print("convert_mlsd.py: " + str(e), file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
