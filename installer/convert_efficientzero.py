#!/usr/bin/python3
"""Convert an official EfficientZero state dict (YeWR/EfficientZero, the Atari network of
config/atari/model.py, saved by its trainer as model.p with torch.save(model.state_dict())) to
Glimpse's HDF5 checkpoint format (family "efficientzero").

Run with Debian's python3 (python3-torch, python3-h5py):

  convert_efficientzero.py IN.p --out OUT.h5 [--obs-size HxW] [--obs-channels N]

Input: the state dict, bare or under 'model' / 'state_dict'; 'module.' prefixes are dropped.
The network's sizes (channels, blocks, reduced channels, head layers, LSTM width, supports,
projection, actions, stacked input channels) are derived from the tensor shapes; what the
tensors cannot tell comes from the options: the observation size (--obs-size, default 96x96,
the paper's) and the channels of one frame (--obs-channels, default 3: RGB; 1 for gray_scale
runs), so that stack = input channels / obs channels. Observations are scaled by 1/255 as the
official code does before its network. Runs with state_norm=True (not the Atari default) cannot
be told from their state dict and are not supported (Glimpse does not renormalize states).

The official code creates modules its forward pass never reads, and they are dropped after a
shape check: representation_network.conv / bn (built even when the stem downsamples),
dynamics_network.reward_resblocks, and the stem's conv2, which is registered twice (also as
downsample_block.downsample; both copies must be equal). Anything else is refused with a clear
message: a state dict of another model, a pickled module, value and reward supports of
different sizes, an action input other than one plane, an observation size that does not give
the LSTM's input size, and any missing, unknown or misshapen tensor (listed by name).
BatchNorm's num_batches_tracked stays int64, as LibTorch has it.

Glimpse HDF5 checkpoint layout (docs/formats.md): root attributes kind = "glimpse.checkpoint",
format_version = 1; group /meta with attributes family, config (JSON string),
format_version; /params/<pytorch name> one dataset per parameter or buffer.
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import convert_letr as cl  # noqa: E402  (HDF5 writing and .pth reading are shared)

ConvertError = cl.ConvertError
REP, DYN, PRED = "representation_network.", "dynamics_network.", "prediction_network."


def recognise(t, path):
    for part in (REP, DYN, PRED):
        if not any(k.startswith(part) for k in t):
            raise ConvertError("%s: not an official EfficientZero state dict (no %s* tensors; it has e.g. %s)"
                               % (path, part, ", ".join(sorted(t)[:3])))
    for name in (DYN + "lstm.weight_ih_l0", DYN + "conv.weight", PRED + "fc_policy.0.weight"):
        if name not in t:
            raise ConvertError("%s: not an official EfficientZero state dict (no %s)" % (path, name))


def count(t, prefix):
    """Number of consecutive ModuleList entries prefix0., prefix1., ..."""
    n = 0
    while any(k.startswith("%s%d." % (prefix, n)) for k in t):
        n += 1
    return n


def head_sizes(t, prefix, path):
    """The Linear layers of an official mlp head: (hidden sizes, output size)."""
    # Linear layers sit at 0, 3, 6, ... (each hidden one followed by BatchNorm1d and ReLU).
    idx = sorted({int(m.group(1)) for k in t for m in [re.fullmatch(re.escape(prefix) + r"(\d+)\.\w+", k)]
                  if m and int(m.group(1)) % 3 == 0})
    if not idx:
        raise ConvertError("%s: no Linear layers under %s" % (path, prefix))
    for i in idx:
        if "%s%d.weight" % (prefix, i) not in t or t["%s%d.weight" % (prefix, i)].dim() != 2:
            raise ConvertError("%s: missing %s%d.weight (a Linear layer of the head %s)" % (path, prefix, i, prefix[:-1]))
    sizes = [int(t["%s%d.weight" % (prefix, i)].shape[0]) for i in idx]
    return sizes[:-1], sizes[-1]


def parse_size(text):
    m = re.fullmatch(r"(\d+)x(\d+)", text)
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise ConvertError("--obs-size wants HxW, e.g. 96x96, got '%s'" % text)
    return int(m.group(1)), int(m.group(2))


def downsampled(n):
    for _ in range(4):
        n = (n - 1) // 2 + 1
    return n


def derive_config(t, path, obs_h, obs_w, obs_c):
    downsample = any(k.startswith(REP + "downsample_net.") for k in t)
    dyn = t[DYN + "conv.weight"]
    channels = int(dyn.shape[0])
    if dyn.dim() != 4 or int(dyn.shape[1]) != channels + 1:
        raise ConvertError("%s: %sconv.weight has shape %s; expected [C, C + 1, 3, 3] (one action plane)"
                           % (path, DYN, list(dyn.shape)))
    stem = t.get(REP + ("downsample_net.conv1.weight" if downsample else "conv.weight"))
    if stem is None:
        raise ConvertError("%s: no representation stem (%s)" % (path, "downsample_net.conv1" if downsample else "conv"))
    in_ch = int(stem.shape[1])
    if in_ch % obs_c:
        raise ConvertError("%s: the network takes %d input channels, not a whole number of %d-channel frames "
                           "(--obs-channels)" % (path, in_ch, obs_c))
    reward_hidden, reward_bins = head_sizes(t, DYN + "fc.", path)
    value_hidden, value_bins = head_sizes(t, PRED + "fc_value.", path)
    policy_hidden, actions = head_sizes(t, PRED + "fc_policy.", path)
    if reward_bins != value_bins or reward_bins % 2 == 0:
        raise ConvertError("%s: value support of %d bins and value-prefix support of %d bins; Glimpse needs one "
                           "odd size for both" % (path, value_bins, reward_bins))
    blocks = count(t, REP + "resblocks.")
    for prefix in (DYN + "resblocks.", PRED + "resblocks."):
        if count(t, prefix) != blocks:
            raise ConvertError("%s: %d residual blocks in the representation, %d in %s" %
                               (path, blocks, count(t, prefix), prefix[:-1]))
    proj_hidden = int(t["projection.0.weight"].shape[0]) if "projection.0.weight" in t else 0
    proj_out = int(t["projection.6.weight"].shape[0]) if "projection.6.weight" in t else 0
    pred_hidden = int(t["projection_head.0.weight"].shape[0]) if "projection_head.0.weight" in t else 0
    pred_out = int(t["projection_head.3.weight"].shape[0]) if "projection_head.3.weight" in t else 0
    if pred_out != proj_out:
        raise ConvertError("%s: the projection head ends at %d, the projection at %d; Glimpse needs them equal"
                           % (path, pred_out, proj_out))
    cfg = {
        "obs_channels": obs_c, "obs_height": obs_h, "obs_width": obs_w, "stack": in_ch // obs_c,
        "obs_scale": 1.0 / 255.0, "num_actions": actions, "one_hot_actions": False, "downsample": downsample,
        "channels": channels, "blocks": blocks,
        "downsample_blocks": count(t, REP + "downsample_net.resblocks1.") if downsample else 1,
        "reduced_channels_reward": int(t[DYN + "conv1x1_reward.weight"].shape[0]),
        "reduced_channels_value": int(t[PRED + "conv1x1_value.weight"].shape[0]),
        "reduced_channels_policy": int(t[PRED + "conv1x1_policy.weight"].shape[0]),
        "lstm_hidden": int(t[DYN + "lstm.weight_hh_l0"].shape[1]),
        "reward_hidden": reward_hidden, "value_hidden": value_hidden, "policy_hidden": policy_hidden,
        "support_size": (value_bins - 1) // 2,
        "proj_hidden": proj_hidden, "proj_out": proj_out, "pred_hidden": pred_hidden,
    }
    sh, sw = (downsampled(obs_h), downsampled(obs_w)) if downsample else (obs_h, obs_w)
    lstm_in = int(t[DYN + "lstm.weight_ih_l0"].shape[1])
    if lstm_in != cfg["reduced_channels_reward"] * sh * sw:
        raise ConvertError("%s: the LSTM reads %d values, but observations of %dx%d give a %dx%d state and %d; "
                           "give the size the network was trained on with --obs-size" %
                           (path, lstm_in, obs_h, obs_w, sh, sw, cfg["reduced_channels_reward"] * sh * sw))
    return cfg


def expected_tensors(cfg):
    """name -> shape of every parameter and buffer of Glimpse's EfficientZero Network
    (mirrors core/models/efficientzero/model.cpp)."""
    out = {}
    C = cfg["channels"]

    def bn(p, c):
        for s in ("weight", "bias", "running_mean", "running_var"):
            out["%s.%s" % (p, s)] = (c,)
        out[p + ".num_batches_tracked"] = ()

    def conv(p, i, o, k, bias=False):
        out[p + ".weight"] = (o, i, k, k)
        if bias:
            out[p + ".bias"] = (o,)

    def linear(p, i, o):
        out[p + ".weight"] = (o, i)
        out[p + ".bias"] = (o,)

    def block(p, i, o, shortcut=False):
        conv(p + ".conv1", i, o, 3)
        bn(p + ".bn1", o)
        conv(p + ".conv2", o, o, 3)
        bn(p + ".bn2", o)
        if shortcut:
            conv(p + ".downsample", i, o, 3)

    def mlp(p, i, hidden, o):
        j = 0
        for h in hidden:
            linear("%s.%d" % (p, j), i, h)
            bn("%s.%d" % (p, j + 1), h)
            i, j = h, j + 3
        linear("%s.%d" % (p, j), i, o)

    in_ch = cfg["obs_channels"] * cfg["stack"]
    if cfg["downsample"]:
        d = REP + "downsample_net"
        conv(d + ".conv1", in_ch, C // 2, 3)
        bn(d + ".bn1", C // 2)
        for i in range(cfg["downsample_blocks"]):
            block("%s.resblocks1.%d" % (d, i), C // 2, C // 2)
        block(d + ".downsample_block", C // 2, C, shortcut=True)
        for i in range(cfg["downsample_blocks"]):
            block("%s.resblocks2.%d" % (d, i), C, C)
            block("%s.resblocks3.%d" % (d, i), C, C)
        sh, sw = downsampled(cfg["obs_height"]), downsampled(cfg["obs_width"])
    else:
        conv(REP + "conv", in_ch, C, 3)
        bn(REP + "bn", C)
        sh, sw = cfg["obs_height"], cfg["obs_width"]
    bins = 2 * cfg["support_size"] + 1
    for i in range(cfg["blocks"]):
        block("%sresblocks.%d" % (REP, i), C, C)
        block("%sresblocks.%d" % (DYN, i), C, C)
        block("%sresblocks.%d" % (PRED, i), C, C)
    conv(DYN + "conv", C + 1, C, 3)
    bn(DYN + "bn", C)
    rr, rv, rp, H = (cfg["reduced_channels_reward"], cfg["reduced_channels_value"], cfg["reduced_channels_policy"],
                     cfg["lstm_hidden"])
    conv(DYN + "conv1x1_reward", C, rr, 1, bias=True)
    bn(DYN + "bn_reward", rr)
    out[DYN + "lstm.weight_ih_l0"] = (4 * H, rr * sh * sw)
    out[DYN + "lstm.weight_hh_l0"] = (4 * H, H)
    out[DYN + "lstm.bias_ih_l0"] = (4 * H,)
    out[DYN + "lstm.bias_hh_l0"] = (4 * H,)
    bn(DYN + "bn_value_prefix", H)
    mlp(DYN + "fc", H, cfg["reward_hidden"], bins)
    conv(PRED + "conv1x1_value", C, rv, 1, bias=True)
    conv(PRED + "conv1x1_policy", C, rp, 1, bias=True)
    bn(PRED + "bn_value", rv)
    bn(PRED + "bn_policy", rp)
    mlp(PRED + "fc_value", rv * sh * sw, cfg["value_hidden"], bins)
    mlp(PRED + "fc_policy", rp * sh * sw, cfg["policy_hidden"], cfg["num_actions"])
    ph, po, qh = cfg["proj_hidden"], cfg["proj_out"], cfg["pred_hidden"]
    linear("projection.0", C * sh * sw, ph)
    bn("projection.1", ph)
    linear("projection.3", ph, ph)
    bn("projection.4", ph)
    linear("projection.6", ph, po)
    bn("projection.7", po)
    linear("projection_head.0", po, qh)
    bn("projection_head.1", qh)
    linear("projection_head.3", qh, po)
    return out


def drop_unused(t, cfg, path):
    """Drops what the official network creates but never reads; returns notes."""
    notes = []
    C = cfg["channels"]
    in_ch = cfg["obs_channels"] * cfg["stack"]
    if cfg["downsample"]:
        unused = {REP + "conv.weight": (C, in_ch, 3, 3)}
        for s in ("weight", "bias", "running_mean", "running_var"):
            unused[REP + "bn." + s] = (C,)
        unused[REP + "bn.num_batches_tracked"] = ()
        for name, shape in unused.items():
            if name in t:
                if tuple(t[name].shape) != shape:
                    raise ConvertError("%s: unused %s has shape %s, expected %s" % (path, name, list(t[name].shape),
                                                                                    list(shape)))
                del t[name]
        notes.append("dropped the unused representation_network.conv/bn")
        twin, canonical = REP + "downsample_net.conv2.weight", REP + "downsample_net.downsample_block.downsample.weight"
        if twin in t:
            if canonical not in t or t[twin].shape != t[canonical].shape or not cl.torch.equal(t[twin], t[canonical]):
                raise ConvertError("%s: %s differs from %s (the official stem registers one convolution under "
                                   "both names; the copies must be equal)" % (path, twin, canonical))
            del t[twin]
            notes.append("dropped downsample_net.conv2 (the same tensor as downsample_block.downsample)")
    reward_blocks = [k for k in t if k.startswith(DYN + "reward_resblocks.")]
    for k in reward_blocks:
        del t[k]
    if reward_blocks:
        notes.append("dropped %d tensors of the unused dynamics_network.reward_resblocks" % len(reward_blocks))
    return notes


def check_tensors(t, cfg, path):
    expected = expected_tensors(cfg)
    missing = sorted(set(expected) - set(t))
    unknown = sorted(set(t) - set(expected))
    wrong = sorted(n for n in set(expected) & set(t) if tuple(t[n].shape) != tuple(expected[n]))
    if missing or unknown or wrong:
        lines = ["%s does not match the EfficientZero network its shapes describe (%d missing, %d unknown, "
                 "%d wrong shape):" % (path, len(missing), len(unknown), len(wrong))]
        lines += ["  missing %s %s" % (n, list(expected[n])) for n in missing[:20]]
        lines += ["  unknown %s %s" % (n, list(t[n].shape)) for n in unknown[:20]]
        lines += ["  wrong shape %s: %s, expected %s" % (n, list(t[n].shape), list(expected[n])) for n in wrong[:20]]
        if max(len(missing), len(unknown), len(wrong)) > 20:
            lines.append("  ... (lists cut at 20 names each)")
        raise ConvertError("\n".join(lines))


def write_checkpoint(path, config, tensors):
    torch, np = cl.torch, cl.np

    def fill(f):
        f.attrs["kind"] = cl.fixed_string("glimpse.checkpoint")
        f.attrs["format_version"] = np.int64(cl.FORMAT_VERSION)
        meta = f.create_group("meta")
        meta.attrs["family"] = cl.fixed_string("efficientzero")
        meta.attrs["config"] = cl.fixed_string(json.dumps(config))
        meta.attrs["format_version"] = np.int64(cl.FORMAT_VERSION)
        params = f.create_group("params")
        for name in sorted(tensors):
            v = tensors[name].detach().cpu()
            v = v.to(torch.int64) if name.endswith("num_batches_tracked") else v.to(torch.float32)
            cl.checked_dataset(params, name, v.contiguous().numpy())

    cl.write_h5_atomically(path, fill)


def convert(in_path, out_path, obs_h, obs_w, obs_c):
    t = cl.plain_state_dict(cl.torch_load(in_path), in_path, "EfficientZero")
    recognise(t, in_path)
    cfg = derive_config(t, in_path, obs_h, obs_w, obs_c)
    notes = drop_unused(t, cfg, in_path)
    check_tensors(t, cfg, in_path)
    write_checkpoint(out_path, cfg, t)
    print("%s -> %s: EfficientZero, %d actions, %d x %dx%d x %d frames, %d channels, %d tensors; %s" %
          (in_path, out_path, cfg["num_actions"], cfg["obs_channels"], obs_h, obs_w, cfg["stack"], cfg["channels"],
           len(t), "; ".join(notes) if notes else "nothing dropped"))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("input", help="official EfficientZero state dict (model.p)")
    p.add_argument("--out", required=True, help="Glimpse checkpoint to write (.h5)")
    p.add_argument("--obs-size", default="96x96", help="observation HxW the network was trained on (default 96x96)")
    p.add_argument("--obs-channels", type=int, default=3, help="channels of one frame (default 3; 1 for gray_scale)")
    a = p.parse_args(argv)
    try:
        obs_h, obs_w = parse_size(a.obs_size)
        if a.obs_channels < 1:
            raise ConvertError("--obs-channels must be >= 1")
    except ConvertError as e:
        print("convert_efficientzero.py: " + str(e), file=sys.stderr)
        return 2
    try:
        if not os.path.isfile(a.input):
            raise ConvertError("%s: no such file" % a.input)
        cl.load_modules()
        convert(a.input, a.out, obs_h, obs_w, a.obs_channels)
    except ConvertError as e:
        print("convert_efficientzero.py: " + str(e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
