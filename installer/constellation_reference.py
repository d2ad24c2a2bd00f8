#!/usr/bin/python3
"""A ConstellationNet written independently with torch.nn from the dissertation's equations and
the facts in docs/models.md "ConstellationNet", with the official code's module layout (so its
state dict has the official names), for checking Glimpse's converter and C++ model end to end.

  constellation_reference.py --out-dir DIR [--seed S]

Writes into DIR, for two small Y-branch models, "conv4" (clustering after every conv of stem and
branch 1, relation after convs 3 and 4) and "res12" (ResNet-12: clustering after conv layer 1 and
7-9, relation after 7-9, with three side-out classifiers):
  <name>.pth      what the official training script saves: {'file', 'config', 'model',
                  'model_args', 'model_sd', 'training'}
  <name>_ref.h5   glimpse.trace with tensors input [B, 3, S, S] and, in eval mode, logits
                  [B, classes], pooled1/pooled2 [B, C] (branch 1 / 2 features), map1 [B, C, h, w]
                  (branch 1 before pooling), sim0 [B, K, S, S] (the first module's similarity)
and for the converter's refusals:
  broken.pth      res12's state dict with an unknown encoder.branch1.0.extra.weight, without
                  encoder.stem.0.bn1.running_var and with a misshapen classifier.linear.bias
  branchy.pth     conv4 whose branch2 has a clustering module
Run with Debian's python3 (torch, h5py); exits with status 3 without them.
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
import torch.nn.functional as F  # noqa: E402

K = 16          # clusters
HEADS = 4
BETA = 100.0
S = 32          # input side


class Clustering(nn.Module):
    """Cosine similarity of every cell to K centers; in training one soft k-means step."""

    def __init__(self, c, gen):
        super().__init__()
        v = torch.randn(K, c, generator=gen)
        self.register_buffer("V_buffer", v / v.norm(dim=1, keepdim=True))
        self.register_buffer("V_count_buffer", torch.ones(K, dtype=torch.float64))

    def forward(self, cells):           # [N, C] -> [N, K]
        u = cells / cells.norm(dim=1, keepdim=True).clamp_min(1e-12)
        centers = self.V_buffer / self.V_buffer.norm(dim=1, keepdim=True)
        sim = u @ centers.t()
        if self.training:
            with torch.no_grad():
                m = torch.softmax(BETA * sim, dim=1)
                mass = m.sum(0)
                mean = (m.t() @ u) / mass[:, None]
                count = self.V_count_buffer + mass.double()
                rate = (mass.double() / count).float()[:, None]
                self.V_buffer.copy_((1 - rate) * self.V_buffer + rate * mean)
                self.V_count_buffer.copy_(count)
        return sim


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear_v = nn.Linear(K, K)
        self.linear_k = nn.Linear(K, K)
        self.linear_q = nn.Linear(K, K)
        self.linear_merge = nn.Linear(K, K)

    def forward(self, q, k, v):          # [B, N, K]
        b, n, _ = q.shape
        d = K // HEADS

        def heads(x):
            return x.reshape(b, n, HEADS, d).permute(0, 2, 1, 3)
        qh, kh, vh = heads(self.linear_q(q)), heads(self.linear_k(k)), heads(self.linear_v(v))
        w = torch.softmax(qh @ kh.transpose(2, 3) / math.sqrt(d), dim=3)
        return self.linear_merge((w @ vh).permute(0, 2, 1, 3).reshape(b, n, K))


class RelationLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.mhatt = Attention()
        self.norm1 = nn.LayerNorm(K)
        self.norm2 = nn.LayerNorm(K)
        self.linear1 = nn.Linear(K, K)
        self.linear2 = nn.Linear(K, K)

    def forward(self, s):               # [B, K, H, W] -> [B, K, H, W]; eval (no dropout)
        b, _, h, w = s.shape
        x = s.permute(0, 2, 3, 1).reshape(b, h * w, K)
        half = K // 2
        i = torch.arange(half, dtype=torch.float32)
        scale = 10000.0 ** (2 * torch.div(i, 2, rounding_mode="floor") / half)

        def enc(n):                     # positions 1..n, [n, half], sin on even, cos on odd
            a = torch.arange(1, n + 1, dtype=torch.float32)[:, None] / scale
            return torch.where(torch.arange(half) % 2 == 0, a.sin(), a.cos())
        pos = torch.cat([enc(h)[:, None, :].expand(h, w, half), enc(w)[None, :, :].expand(h, w, half)], 2)
        qk = x + pos.reshape(1, h * w, K)
        y = self.norm1(x + self.mhatt(qk, qk, x))
        y = self.norm2(y + self.linear2(F.relu(self.linear1(y))))
        return y.reshape(b, h, w, K).permute(0, 3, 1, 2)


class Relation(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([RelationLayer()])

    def forward(self, s):
        return self.layers[0](s)


class Unit(nn.Module):
    """3x3 conv, optional clustering (+ relation) and 1x1 merge; with_bn: then BN (Conv-4)."""

    def __init__(self, cin, cout, cluster, relation, with_bn, gen):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.cluster = cluster
        if relation:
            self.transformer = Relation()
        if cluster:
            self.feat_cluster = Clustering(cout, gen)
            self.merge = nn.Conv2d(cout + K, cout, 1, bias=False)
        if with_bn:
            self.bn = nn.BatchNorm2d(cout)
        self.records = None

    def forward(self, x):
        y = self.conv(x)
        if self.cluster:
            b, c, h, w = y.shape
            sim = self.feat_cluster(y.permute(0, 2, 3, 1).reshape(-1, c)).reshape(b, h, w, K).permute(0, 3, 1, 2)
            if self.records is not None:
                self.records.append(sim)
            side = self.transformer(sim) if hasattr(self, "transformer") else sim
            y = self.merge(torch.cat([y, side], 1))
        return self.bn(y) if hasattr(self, "bn") else y


class ConvBlock(Unit):
    """Conv-4 block: the unit with its BN, then ReLU and max-pool 2."""

    def __init__(self, cin, cout, cluster, relation, gen):
        super().__init__(cin, cout, cluster, relation, True, gen)

    def forward(self, x):
        return F.max_pool2d(F.relu(super().forward(x)), 2)


class ResBlock(nn.Module):
    def __init__(self, cin, cout, cluster, relation, gen):
        super().__init__()
        for j in range(3):
            setattr(self, "mergeblock%d" % (j + 1), Unit(cin if j == 0 else cout, cout, cluster[j], relation[j], False, gen))
            setattr(self, "bn%d" % (j + 1), nn.BatchNorm2d(cout))
        self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.leaky_relu(self.bn1(self.mergeblock1(x)), 0.1)
        y = F.leaky_relu(self.bn2(self.mergeblock2(y)), 0.1)
        y = self.bn3(self.mergeblock3(y))
        return F.max_pool2d(F.leaky_relu(y + self.downsample(x), 0.1), 2)


class Encoder(nn.Module):
    def __init__(self, resnet, channels, cluster, relation, gen):
        super().__init__()
        per = 3 if resnet else 1

        def make(first, last, constellation):
            blocks = []
            for b in range(first, last):
                cin = 3 if b == 0 else channels[b - 1]
                layers = [b * per + j + 1 for j in range(per)]
                cf = [constellation and ly in cluster for ly in layers]
                rf = [constellation and ly in relation for ly in layers]
                blocks.append(ResBlock(cin, channels[b], cf, rf, gen) if resnet
                              else ConvBlock(cin, channels[b], cf[0], rf[0], gen))
            return nn.ModuleList(blocks)
        self.stem = make(0, 2, True)
        self.branch1 = make(2, 4, True)
        self.branch2 = make(2, 4, False)

    def forward(self, x, branch):
        for blk in self.stem:
            x = blk(x)
        for blk in (self.branch1 if branch == 1 else self.branch2):
            x = blk(x)
        return x


class Linear(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.linear = nn.Linear(i, o)

    def forward(self, x):
        return self.linear(x)


class Model(nn.Module):
    def __init__(self, resnet, channels, cluster, relation, classes, sideouts, gen):
        super().__init__()
        self.encoder = Encoder(resnet, channels, cluster, relation, gen)
        self.classifier = Linear(channels[3], classes)
        self.sideout_classifiers = nn.ModuleList([Linear(c, classes) for c in sideouts])
        self.temp = nn.Parameter(torch.tensor(10.0))


def randomize(model, gen):
    """Random weights, batch-norm statistics and centers (moved off the unit sphere, so that the
    model must normalize them) with uneven counts."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name == "temp":
                p.fill_(7.5)
            elif p.dim() == 4:
                p.normal_(0, math.sqrt(2.0 / (p.shape[0] * p.shape[2] * p.shape[3])), generator=gen)
            elif name.endswith("weight") and ("bn" in name or "norm" in name or "downsample.1" in name):
                p.uniform_(0.5, 1.5, generator=gen)
            else:
                p.uniform_(-0.3, 0.3, generator=gen)
        for name, b in model.named_buffers():
            if name.endswith("running_mean"):
                b.uniform_(-0.2, 0.2, generator=gen)
            elif name.endswith("running_var"):
                b.uniform_(0.5, 2.0, generator=gen)
            elif name.endswith("num_batches_tracked"):
                b.fill_(123)
            elif name.endswith("V_buffer"):
                b.mul_(torch.rand(b.shape[0], 1, generator=gen) + 0.5)
            elif name.endswith("V_count_buffer"):
                b.copy_(torch.rand(b.shape[0], generator=gen).double() * 50 + 1)


def units(model):
    return [m for m in model.modules() if isinstance(m, Unit)]


def reference(model, x):
    model.eval()
    for u in units(model):
        u.records = []
    with torch.no_grad():
        m1 = model.encoder(x, 1)
        sims = [r for u in units(model) if u.records for r in u.records]
        for u in units(model):
            u.records = None
        m2 = model.encoder(x, 2)
        p1, p2 = m1.mean((2, 3)), m2.mean((2, 3))
        return {"input": x, "logits": model.classifier(p1), "pooled1": p1, "pooled2": p2, "map1": m1, "sim0": sims[0]}


def model_args(resnet, channels, classes, sideouts):
    if resnet:
        enc = {"stem_use_feat_cluster_list": [[True, False, False], [False, False, False]],
               "branch1_use_feat_cluster_list": [[True, True, True], [False, False, False]],
               "branch2_use_feat_cluster_list": [[False, False, False], [False, False, False]],
               "branch1_use_self_attention_list": [[True, True, True], [False, False, False]]}
    else:
        enc = {"stem_use_feat_cluster_list": [True, True], "branch1_use_feat_cluster_list": [True, True],
               "branch2_use_feat_cluster_list": [False, False], "branch1_use_self_attention_list": [True, True]}
    enc.update({"self_attention_kwargs": {"multi_head": HEADS, "positional_encoding": "sine_pe", "pre_normalize": False,
                                          "embedding_size": K},
                "feat_cluster_kwargs": {"K": BETA, "num_clusters": K, "fix_init": True, "channels": channels[0],
                                        "V_count_init": 1.0},
                "y_branch_stage": 2})
    return {"encoder": "resnet12" if resnet else "convnet4", "encoder_args": enc, "classifier": "linear-classifier",
            "classifier_args": {"n_classes": classes},
            "sideout_info": [["branch1.0.mergeblock%d.sideoutfeature.avgpool" % (i + 1), c] for i, c in enumerate(sideouts)]}


def build(name, seed):
    gen = torch.Generator().manual_seed(seed)
    if name == "conv4":
        resnet, channels, cluster, relation, sideouts = False, [8, 8, 6, 6], [1, 2, 3, 4], [3, 4], []
    else:
        resnet, channels, cluster, relation, sideouts = True, [8, 8, 12, 10], [1, 7, 8, 9], [7, 8, 9], [12, 12, 12]
    classes = 7
    model = Model(resnet, channels, cluster, relation, classes, sideouts, gen)
    randomize(model, gen)
    return model, model_args(resnet, channels, classes, sideouts)


def save_official(path, model_name, args, sd):
    torch.save({"file": "train_classifier_sideout_classifier_ybranch.py", "config": {"model": model_name},
                "model": "classifier-sideout-class-meta", "model_args": args, "model_sd": sd,
                "training": {"epoch": 3}}, path)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out-dir", required=True)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    os.makedirs(a.out_dir, exist_ok=True)
    for i, name in enumerate(("conv4", "res12")):
        model, args = build(name, a.seed * 10 + i)
        # One training step first: the centers move the way the model's own update moves them.
        model.train()
        with torch.no_grad():
            model.encoder(torch.randn(3, 3, S, S, generator=torch.Generator().manual_seed(a.seed + 50)), 1)
        x = torch.randn(3, 3, S, S, generator=torch.Generator().manual_seed(a.seed + 100 + i))
        ref = reference(model, x)
        save_official(os.path.join(a.out_dir, name + ".pth"), name, args, model.state_dict())
        cl.write_trace(os.path.join(a.out_dir, name + "_ref.h5"), "constellation-reference", {"model": name},
                       {k: v.float() for k, v in ref.items()})
        if name == "res12":
            sd = dict(model.state_dict())
            sd["encoder.branch1.0.extra.weight"] = torch.zeros(3)
            del sd["encoder.stem.0.bn1.running_var"]
            sd["classifier.linear.bias"] = torch.zeros(5)
            save_official(os.path.join(a.out_dir, "broken.pth"), name, args, sd)
        else:
            sd = dict(model.state_dict())
            sd["encoder.branch2.0.feat_cluster.V_buffer"] = torch.zeros(K, 6)
            save_official(os.path.join(a.out_dir, "branchy.pth"), name, args, sd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
