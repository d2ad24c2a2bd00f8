#!/usr/bin/python3
"""A LETR written independently with torch.nn (nn.MultiheadAttention, torchvision ResNet), laid out
like the official checkpoints, for checking Glimpse's converter and C++ model end to end.

  letr_reference.py --out-dir DIR [--seed S] [--backbone resnet18] [--hidden-dim 32]
                    [--nheads 4] [--ffn 64] [--enc-layers 1] [--dec-layers 2] [--queries 12]
                    [--input-size 96x128]

Writes into DIR:
  stage2.pth, stage2_ref.h5   a two-stage model as the official stage-2 files are laid out
                              ({'model', 'optimizer', 'lr_scheduler', 'epoch', 'args': Namespace};
                              backbone.0.body.* repeated under letr.backbone.0.body.*; heads under
                              the older name bbox_embed)
  stage1.pth, stage1_ref.h5   a coarse-only (stage-1) model, everything at top level
  broken.pth                  stage 2 with transformer.decoder.norm.bias missing, an unknown
                              letr.extra.weight and class_embed.weight of the wrong shape
  twins.pth                   stage 2 whose two backbone copies differ
The *_ref.h5 files are glimpse.trace files holding the normalized input [3, H, W] and, per
stage, the logits [L, N, C+1] and sigmoid lines [L, N, 4] of every decoder layer.
Run with Debian's python3 (torch, torchvision, h5py); exits with status 3 without them.
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import convert_letr as cl  # noqa: E402

cl.load_modules()
import torch  # noqa: E402
from torch import nn  # noqa: E402


def sine_pos(mask, num_feats, temperature=10000.0):
    """mask [B, h, w] bool (True = padding) -> [B, 2F, h, w]; see docs/models.md "LETR"."""
    valid = (~mask).float()
    y = valid.cumsum(1)
    x = valid.cumsum(2)
    y = y / (y[:, -1:, :] + 1e-6) * (2 * math.pi)
    x = x / (x[:, :, -1:] + 1e-6) * (2 * math.pi)
    i = torch.arange(num_feats, dtype=torch.float32)
    freq = temperature ** (2 * torch.div(i, 2, rounding_mode="floor") / num_feats)
    out = []
    for p in (y, x):
        a = p[..., None] / freq
        enc = torch.empty_like(a)
        enc[..., 0::2] = a[..., 0::2].sin()
        enc[..., 1::2] = a[..., 1::2].cos()
        out.append(enc)
    return torch.cat(out, dim=3).permute(0, 3, 1, 2)


class EncoderLayer(nn.Module):
    def __init__(self, d, h, ffn):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d, h)
        self.linear1, self.linear2 = nn.Linear(d, ffn), nn.Linear(ffn, d)
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, src, mask, pos):   # sequence first: [S, B, d]
        q = src + pos
        src = self.norm1(src + self.self_attn(q, q, src, key_padding_mask=mask)[0])
        return self.norm2(src + self.linear2(torch.relu(self.linear1(src))))


class DecoderLayer(nn.Module):
    def __init__(self, d, h, ffn):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d, h)
        self.multihead_attn = nn.MultiheadAttention(d, h)
        self.linear1, self.linear2 = nn.Linear(d, ffn), nn.Linear(ffn, d)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, tgt, memory, mask, pos, query_pos):
        q = tgt + query_pos
        tgt = self.norm1(tgt + self.self_attn(q, q, tgt)[0])
        tgt = self.norm2(tgt + self.multihead_attn(tgt + query_pos, memory + pos, memory,
                                                   key_padding_mask=mask)[0])
        return self.norm3(tgt + self.linear2(torch.relu(self.linear1(tgt))))


class Stack(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layers = nn.ModuleList(layers)


class Transformer(nn.Module):
    def __init__(self, d, h, ffn, enc, dec):
        super().__init__()
        self.encoder = Stack([EncoderLayer(d, h, ffn) for _ in range(enc)])
        self.decoder = Stack([DecoderLayer(d, h, ffn) for _ in range(dec)])
        self.decoder.norm = nn.LayerNorm(d)

    def forward(self, src, mask, query_pos, pos):
        """src [B, d, h, w], mask [B, h, w], query_pos [N, d] or [B, N, d] -> [L, B, N, d]."""
        b = src.shape[0]
        src = src.flatten(2).permute(2, 0, 1)
        pos = pos.flatten(2).permute(2, 0, 1)
        mask = mask.flatten(1)
        if query_pos.dim() == 2:
            query_pos = query_pos.unsqueeze(1).repeat(1, b, 1)
        else:
            query_pos = query_pos.permute(1, 0, 2)
        memory = src
        for layer in self.encoder.layers:
            memory = layer(memory, mask, pos)
        tgt = torch.zeros_like(query_pos)
        hs = []
        for layer in self.decoder.layers:
            tgt = layer(tgt, memory, mask, pos, query_pos)
            hs.append(self.decoder.norm(tgt))
        return torch.stack(hs).transpose(1, 2)


class MLP(nn.Module):
    def __init__(self, d_in, d_hidden, d_out, n):
        super().__init__()
        dims = [d_in] + [d_hidden] * (n - 1) + [d_out]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = torch.relu(x)
        return x


class Body(nn.Module):
    def __init__(self, resnet):
        super().__init__()
        for name in ("conv1", "bn1", "layer1", "layer2", "layer3", "layer4"):
            setattr(self, name, getattr(resnet, name))

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        feats = []
        for layer in (self.layer1, self.layer2, self.layer3, self.layer4):
            x = layer(x)
            feats.append(x)
        return feats   # C2..C5


class Holder(nn.Module):
    def __init__(self, body):
        super().__init__()
        self.body = body


class Head(nn.Module):
    """One stage's input_proj, transformer and heads (the coarse one also owns the queries)."""

    def __init__(self, channels, a, queries=None):
        super().__init__()
        self.input_proj = nn.Conv2d(channels, a.hidden_dim, 1)
        if queries:
            self.query_embed = nn.Embedding(queries, a.hidden_dim)
        self.transformer = Transformer(a.hidden_dim, a.nheads, a.ffn, a.enc_layers, a.dec_layers)
        self.class_embed = nn.Linear(a.hidden_dim, 2)
        self.lines_embed = MLP(a.hidden_dim, a.hidden_dim, 4, 3)

    def run(self, feat, query_pos):
        mask = torch.zeros(feat.shape[0], feat.shape[2], feat.shape[3], dtype=torch.bool)
        pos = sine_pos(mask, self.input_proj.out_channels // 2)
        hs = self.transformer(self.input_proj(feat), mask, query_pos, pos)
        return hs, self.class_embed(hs), self.lines_embed(hs).sigmoid()


def build(a, size, coarse_only, old_names):
    """-> (official-layout state dict, args Namespace, reference outputs)."""
    resnet, gen = cl.random_torchvision_resnet(a.backbone, a.seed, size)
    backbone = nn.Sequential(Holder(Body(resnet)))
    coarse = Head(cl.level_channels(a.backbone, 5), a, queries=a.queries)
    fine = None if coarse_only else Head(cl.level_channels(a.backbone, 4), a)
    with torch.no_grad():   # non-trivial biases and norms so that every tensor matters
        for head in [h for h in (coarse, fine) if h is not None]:
            for name, t in head.named_parameters():
                if name.endswith("bias") or ".norm" in name:
                    t.add_(torch.randn(t.shape, generator=gen) * 0.1)

    x = torch.randn(1, 3, size[0], size[1], generator=gen)
    outs = {"input": x[0]}
    with torch.no_grad():
        feats = backbone[0].body(x)
        hs, logits, lines = coarse.run(feats[3], coarse.query_embed.weight)
        outs["coarse_logits"], outs["coarse_lines"] = logits[:, 0], lines[:, 0]
        if fine is not None:
            _, logits2, lines2 = fine.run(feats[2], hs[-1])
            outs["fine_logits"], outs["fine_lines"] = logits2[:, 0], lines2[:, 0]

    sd = {}
    for k, v in backbone.state_dict().items():
        if not k.endswith("num_batches_tracked"):   # the official FrozenBatchNorm2d has none
            sd["backbone." + k] = v.clone()
    if fine is None:   # stage-1 layout: everything at top level
        for k, v in coarse.state_dict().items():
            sd[k] = v.clone()
    else:
        for k in list(sd):
            sd["letr." + k] = sd[k].clone()
        for k, v in coarse.state_dict().items():
            sd["letr." + k] = v.clone()
        for k, v in fine.state_dict().items():
            sd[k] = v.clone()
    if old_names:
        sd = {k.replace("lines_embed.", "bbox_embed."): v for k, v in sd.items()}
    args = argparse.Namespace(backbone=a.backbone, hidden_dim=a.hidden_dim, nheads=a.nheads,
                              dim_feedforward=a.ffn, enc_layers=a.enc_layers, dec_layers=a.dec_layers,
                              num_queries=a.queries, dropout=0.1, layer1_num=3, layer2_num=2,
                              LETRpost=fine is not None)
    return sd, args, outs


def save_pth(path, sd, args):
    torch.save({"model": sd, "optimizer": {"state": {}, "param_groups": []}, "lr_scheduler": {},
                "epoch": 7, "args": args}, path)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out-dir", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backbone", default="resnet18")
    p.add_argument("--hidden-dim", type=int, default=32)
    p.add_argument("--nheads", type=int, default=4)
    p.add_argument("--ffn", type=int, default=64)
    p.add_argument("--enc-layers", type=int, default=1)
    p.add_argument("--dec-layers", type=int, default=2)
    p.add_argument("--queries", type=int, default=12)
    p.add_argument("--input-size", default="96x128")
    a = p.parse_args()
    size = cl.parse_size(a.input_size)
    os.makedirs(a.out_dir, exist_ok=True)
    out = lambda name: os.path.join(a.out_dir, name)  # noqa: E731

    sd2 = None
    for tag, coarse_only, old_names in (("stage2", False, True), ("stage1", True, False)):
        sd, args, outs = build(a, size, coarse_only, old_names)
        save_pth(out(tag + ".pth"), sd, args)
        cl.write_trace(out(tag + "_ref.h5"), "letr-reference", {"seed": a.seed, "backbone": a.backbone}, outs)
        if tag == "stage2":
            sd2, args2 = sd, args

    broken = dict(sd2)
    del broken["transformer.decoder.norm.bias"]
    broken["letr.extra.weight"] = torch.zeros(3)
    broken["class_embed.weight"] = torch.zeros(3, a.hidden_dim)
    save_pth(out("broken.pth"), broken, args2)
    twins = dict(sd2)
    twins["letr.backbone.0.body.conv1.weight"] = twins["letr.backbone.0.body.conv1.weight"] + 1
    save_pth(out("twins.pth"), twins, args2)
    print("reference LETRs (%s) -> %s" % (a.backbone, a.out_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
