#!/usr/bin/python3
"""An M-LSD tiny written independently from the facts in docs/models.md "M-LSD" (functional
torch over a state dict laid out like the PyTorch port's), with random weights, for checking
Glimpse's converter, network and post-processing end to end.

  mlsd_reference.py --out-dir DIR [--seed S] [--size 64]

Writes into DIR:
  tiny.pth        a state dict with M-LSD tiny's names and random weights and batch-norm
                  statistics (the stem's fourth input channel is random too, not zero)
  image.png       a SIZE x SIZE RGB image (rectangles and a few lines on a gradient)
  config.json     the converter options: input size SIZE, top_k, and score / length thresholds
                  halfway between candidates, so that both filters drop some
  ref.h5          glimpse.trace, tensors: input [1, 4, S, S], maps [1, 9, S/2, S/2],
                  lines [N, 4] and scores [N] for the image as it is, and lines_wide [N, 4] for
                  an image of meta width x height (the same maps scaled to another image size)
and for the converter's refusals:
  broken.pth      tiny with block16.conv3.bias missing, an unknown extra.weight and a misshapen
                  block13.conv1.0.weight
  large.pth       a state dict with M-LSD large's decoder names (block15-block23)
  training.pth    a 3-channel stem and an extra block17 (the training code's layout)
  module.pth      a pickled torch.nn.Module instead of a state dict
  letr.pth        a LETR-like dict {'model': {...letr.* names...}}
Run with Debian's python3 (torch, h5py, numpy, PIL); exits with status 3 without them.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import convert_letr as cl  # noqa: E402
import convert_mlsd as cm  # noqa: E402

cl.load_modules()
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

try:
    from PIL import Image, ImageDraw  # noqa: E402
except ImportError as e:
    print("mlsd_reference.py: needs PIL (%s)" % e, file=sys.stderr)
    sys.exit(cl.EXIT_NO_TORCH)


def random_state_dict(gen):
    sd = {}
    for name, shape in cm.expected_tensors().items():
        if name.endswith("num_batches_tracked"):
            sd[name] = torch.tensor(7, dtype=torch.int64)
        elif name.endswith("running_var"):
            sd[name] = 0.5 + torch.rand(shape, generator=gen)
        elif name.endswith("running_mean") or name.endswith(".bias"):
            sd[name] = 0.1 * torch.randn(shape, generator=gen)
        elif len(shape) == 1:   # batch-norm scale
            sd[name] = 0.5 + torch.rand(shape, generator=gen)
        else:
            fan_in = shape[1] * shape[2] * shape[3]
            sd[name] = torch.randn(shape, generator=gen) * (2.0 / fan_in) ** 0.5
    return sd


def bn(sd, p, x):
    return F.batch_norm(x, sd[p + ".running_mean"], sd[p + ".running_var"], sd[p + ".weight"], sd[p + ".bias"],
                        training=False, eps=1e-5)


def mbv2_unit(sd, p, x, stride, groups):
    """conv (no bias) + BN + ReLU6; stride 2 pads one row/column at the bottom/right only."""
    w = sd[p + ".0.weight"]
    if stride == 2:
        x = F.pad(x, (0, 1, 0, 1))
        pad = 0
    else:
        pad = w.shape[-1] // 2
    return F.relu6(bn(sd, p + ".1", F.conv2d(x, w, None, stride, pad, 1, groups)))


def encoder(sd, x):
    x = mbv2_unit(sd, "backbone.features.0", x, 2, 1)
    feats = {}
    index = 1
    for t, c, n, s in cm.MBV2_ROWS:
        for i in range(n):
            p = "backbone.features.%d.conv." % index
            stride = s if i == 0 else 1
            y = x
            j = 0
            if t != 1:
                y = mbv2_unit(sd, p + "0", y, 1, 1)
                j = 1
            y = mbv2_unit(sd, p + str(j), y, stride, y.shape[1])
            y = bn(sd, p + str(j + 2), F.conv2d(y, sd[p + str(j + 1) + ".weight"]))
            x = x + y if (stride == 1 and x.shape[1] == y.shape[1]) else y
            feats[index] = x
            index += 1
    return feats[3], feats[6], feats[10]


def dec_unit(sd, p, x, dilation=1):
    w = sd[p + ".0.weight"]
    pad = dilation * (w.shape[-1] // 2)
    return F.relu(bn(sd, p + ".1", F.conv2d(x, w, sd[p + ".0.bias"], 1, pad, dilation)))


def up2(x):
    return F.interpolate(x, size=(x.shape[2] * 2, x.shape[3] * 2), mode="bilinear", align_corners=True)


def network(sd, x):
    c2, c3, c4 = encoder(sd, x)
    y = torch.cat([dec_unit(sd, "block12.conv2", c3), up2(dec_unit(sd, "block12.conv1", c4))], 1)
    y = dec_unit(sd, "block13.conv2", dec_unit(sd, "block13.conv1", y) + y)
    y = torch.cat([dec_unit(sd, "block14.conv2", c2), up2(dec_unit(sd, "block14.conv1", y))], 1)
    y = dec_unit(sd, "block15.conv2", dec_unit(sd, "block15.conv1", y) + y)
    y = dec_unit(sd, "block16.conv2", dec_unit(sd, "block16.conv1", y, dilation=5))
    y = F.conv2d(y, sd["block16.conv3.weight"], sd["block16.conv3.bias"])
    return up2(y[:, 7:])


def candidates(maps, top_k, kernel):
    """(scores, ys, xs, displacement [h, w, 4]) of the top-K local maxima of the centre map."""
    heat = torch.sigmoid(maps[0, 0])
    peak = F.max_pool2d(heat[None, None], kernel, stride=1, padding=(kernel - 1) // 2)[0, 0]
    heat = torch.where(peak == heat, heat, torch.zeros_like(heat)).flatten()
    scores, idx = torch.topk(heat, min(top_k, heat.numel()))
    w = maps.shape[3]
    disp = maps[0, 1:5].permute(1, 2, 0).numpy()
    return scores.numpy(), (idx // w).numpy(), (idx % w).numpy(), disp


def decode(maps, cfg, width, height):
    scores, ys, xs, disp = candidates(maps, cfg["top_k"], cfg["nms_kernel"])
    length = np.sqrt(((disp[:, :, :2] - disp[:, :, 2:]) ** 2).sum(-1))
    lines, kept = [], []
    fx = 2.0 * width / cfg["input_size"]
    fy = 2.0 * height / cfg["input_size"]
    for s, y, x in zip(scores, ys, xs):
        if s > cfg["score_threshold"] and length[y, x] > cfg["length_threshold"]:
            d = disp[y, x].astype(np.float64)
            lines.append([(x + d[0]) * fx, (y + d[1]) * fy, (x + d[2]) * fx, (y + d[3]) * fy])
            kept.append(s)
    return np.array(lines, dtype=np.float64).reshape(-1, 4), np.array(kept, dtype=np.float32)


def make_image(size, gen):
    g = np.linspace(40, 200, size, dtype=np.float32)
    img = np.stack([np.add.outer(g, g) / 2, np.add.outer(g, g[::-1]) / 2, np.full((size, size), 90.0)], -1)
    pil = Image.fromarray(img.astype(np.uint8), "RGB")
    d = ImageDraw.Draw(pil)
    r = torch.randint(0, size, (12,), generator=gen).tolist()
    d.rectangle([min(r[0], r[1]), min(r[2], r[3]), max(r[0], r[1]), max(r[2], r[3])], outline=(250, 250, 250), width=2)
    d.rectangle([size // 5, size // 4, size // 2, size * 3 // 4], fill=(20, 30, 160))
    d.line([r[4], r[5], r[6], r[7]], fill=(255, 220, 0), width=2)
    d.line([r[8], r[9], r[10], r[11]], fill=(0, 0, 0), width=1)
    return pil


def midpoint_above(values, fraction):
    """A threshold halfway between two neighbouring sorted values, about `fraction` from the top."""
    v = np.sort(np.asarray(values, dtype=np.float64))[::-1]
    i = max(0, min(len(v) - 2, int(len(v) * fraction)))
    return float((v[i] + v[i + 1]) / 2)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out-dir", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--size", type=int, default=64)
    a = p.parse_args()
    if a.size < 32 or a.size % 32:
        print("mlsd_reference.py: --size must be a positive multiple of 32", file=sys.stderr)
        return 2
    os.makedirs(a.out_dir, exist_ok=True)
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(a.seed)
    sd = random_state_dict(gen)
    pil = make_image(a.size, gen)
    pil.save(os.path.join(a.out_dir, "image.png"))
    rgb = np.asarray(pil, dtype=np.uint8)
    four = np.concatenate([rgb, np.ones(rgb.shape[:2] + (1,), dtype=np.uint8)], -1).astype(np.float32)
    x = torch.from_numpy((four / np.float32(127.5) - np.float32(1.0)).transpose(2, 0, 1)[None].copy())
    with torch.no_grad():
        maps = network(sd, x)
        # Random weights give centre logits and displacements of any scale: rescale the output
        # convolution's channels (the output is linear in them) to centre logits of mean -1, std 2.5
        # (scores spread over (0, 1)) and displacements of std 6 map pixels.
        for c, (mean, std) in enumerate([(-1.0, 2.5)] + [(0.0, 6.0)] * 4):
            m = maps[0, c]
            k = std / float(m.std())
            sd["block16.conv3.weight"][7 + c] *= k
            sd["block16.conv3.bias"][7 + c] = (sd["block16.conv3.bias"][7 + c] - float(m.mean())) * k + mean
        maps = network(sd, x)

    # Thresholds that drop some candidates by score and others by length.
    top_k = 24
    scores, ys, xs, disp = candidates(maps, top_k, 3)
    length = np.sqrt(((disp[:, :, :2] - disp[:, :, 2:]) ** 2).sum(-1))
    live = scores > 0   # local maxima (the others were zeroed by the max pool)
    cfg = {"input_size": a.size, "top_k": top_k, "nms_kernel": 3,
           "score_threshold": midpoint_above(scores[live], 0.8),
           "length_threshold": midpoint_above(length[ys, xs][live], 0.7)}
    lines, kept = decode(maps, cfg, a.size, a.size)
    wide = (a.size * 5 // 2 + 3, a.size * 3 // 2 + 1)
    lines_wide, _ = decode(maps, cfg, wide[0], wide[1])
    if len(kept) < 3 or len(kept) >= len(scores):
        print("mlsd_reference.py: seed %d gives %d of %d lines; pick another seed" % (a.seed, len(kept), len(scores)),
              file=sys.stderr)
        return 1
    with open(os.path.join(a.out_dir, "config.json"), "w") as f:
        json.dump(cfg, f)
    torch.save(sd, os.path.join(a.out_dir, "tiny.pth"))
    cl.write_trace(os.path.join(a.out_dir, "ref.h5"), "mlsd-reference",
                   {"width": wide[0], "height": wide[1], "seed": a.seed, "config": cfg},
                   {"input": x, "maps": maps, "lines": torch.from_numpy(lines), "scores": torch.from_numpy(kept),
                    "lines_wide": torch.from_numpy(lines_wide)})

    broken = dict(sd)
    del broken["block16.conv3.bias"]
    broken["extra.weight"] = torch.zeros(3)
    broken["block13.conv1.0.weight"] = torch.zeros(128, 128, 1, 1)
    torch.save(broken, os.path.join(a.out_dir, "broken.pth"))
    large = {k: v for k, v in sd.items() if k.startswith("backbone.")}
    for b in range(15, 24):
        large["block%d.conv1.0.weight" % b] = torch.zeros(64, 64, 1, 1)
    torch.save(large, os.path.join(a.out_dir, "large.pth"))
    training = dict(sd)
    training["backbone.features.0.0.weight"] = torch.zeros(32, 3, 3, 3)
    training["block17.weight"] = torch.zeros(1, 16, 1, 1)
    training["block17.bias"] = torch.zeros(1)
    torch.save(training, os.path.join(a.out_dir, "training.pth"))
    torch.save(torch.nn.Conv2d(4, 32, 3), os.path.join(a.out_dir, "module.pth"))
    torch.save({"model": {"letr.query_embed.weight": torch.zeros(10, 8)}, "epoch": 1},
               os.path.join(a.out_dir, "letr.pth"))
    print("mlsd_reference.py: %d of %d candidates kept; wrote %s" % (len(kept), len(scores), a.out_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
