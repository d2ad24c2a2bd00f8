#!/usr/bin/python3
"""A CoaT written independently with torch.nn from the dissertation's equations and the facts in
docs/models.md "CoaT", laid out like timm's state dicts (shared modules repeated under each user),
for checking Glimpse's converter and C++ model end to end.

  coat_reference.py --out-dir DIR [--seed S] [--size 64x96]

Writes into DIR, for two small models, "lite" (CoaT-Lite layout, no parallel groups) and
"coat" (two parallel groups with feature-interpolation co-scale, CLS aggregation):
  <name>.pth        the state dict (lite: bare; coat: {'model': state_dict, 'epoch': 3})
  <name>_ref.h5     glimpse.trace with tensors input [1, 3, H, W] and logits [1, classes]
and for the converter's refusals:
  broken.pth        lite with head.bias missing, an unknown extra.weight and a misshapen norm4.weight
  twins.pth         lite whose copy serial_blocks2.1.cpe.proj.weight differs from cpe2.proj.weight
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

WINDOW = [(3, 2), (5, 3), (7, 3)]   # CRPE kernel sizes and their head counts, in head order


def to_grid(tokens, h, w):
    """[B, 1+h*w, C] -> CLS [B, 1, C], image [B, C, h, w]."""
    b, _, c = tokens.shape
    return tokens[:, :1], tokens[:, 1:].permute(0, 2, 1).reshape(b, c, h, w)


def from_grid(cls, img):
    return torch.cat([cls, img.flatten(2).permute(0, 2, 1)], dim=1)


class Embed(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.proj = nn.Conv2d(cin, cout, stride, stride)
        self.norm = nn.LayerNorm(cout)          # eps 1e-5 in patch embeddings

    def forward(self, x):
        y = self.proj(x)
        return self.norm(y.flatten(2).transpose(1, 2)), y.shape[2], y.shape[3]


class Cpe(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.proj = nn.Conv2d(c, c, 3, padding=1, groups=c)

    def forward(self, x, h, w):
        cls, img = to_grid(x, h, w)
        return from_grid(cls, img + self.proj(img))


class Crpe(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.ch = ch
        self.conv_list = nn.ModuleList(
            [nn.Conv2d(n * ch, n * ch, k, padding=k // 2, groups=n * ch) for k, n in WINDOW])

    def forward(self, q, v, h, w):
        # q, v: [B, heads, N, ch]; each head group convolved separately, head by head.
        b, heads, n, ch = q.shape
        outs = []
        head = 0
        for conv, (k, nh) in zip(self.conv_list, WINDOW):
            for j in range(nh):
                vi = v[:, head, 1:].transpose(1, 2).reshape(b, ch, h, w)
                wgt = conv.weight[j * ch:(j + 1) * ch]
                bias = conv.bias[j * ch:(j + 1) * ch]
                cv = F.conv2d(vi, wgt, bias, padding=k // 2, groups=ch).reshape(b, ch, h * w).transpose(1, 2)
                outs.append(q[:, head, 1:] * cv)
                head += 1
        img = torch.stack(outs, dim=1)                       # [B, heads, h*w, ch]
        return torch.cat([torch.zeros_like(img[:, :, :1]), img], dim=2)


class Att(nn.Module):
    def __init__(self, c, heads, crpe):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)
        self.crpe = crpe

    def split(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        f = lambda t: t.reshape(b, n, self.heads, c // self.heads).transpose(1, 2)  # noqa: E731
        return f(q), f(k), f(v)

    def heads_out(self, q, k, v, h, w):
        ch = q.shape[-1]
        # Written as explicit effective weights: W = Q softmax(K)^T / sqrt(C), out = W V.
        weights = torch.einsum("bhic,bhjc->bhij", q, k.softmax(dim=2)) / math.sqrt(ch)
        out = torch.einsum("bhij,bhjc->bhic", weights, v)
        if self.crpe is not None:
            out = out + self.crpe(q, v, h, w)
        return out

    def merge(self, o):
        b, heads, n, ch = o.shape
        return self.proj(o.transpose(1, 2).reshape(b, n, heads * ch))

    def forward(self, x, h, w):
        return self.merge(self.heads_out(*self.split(x), h, w))


class Mlp(nn.Module):
    def __init__(self, c, hidden):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(c, hidden), nn.Linear(hidden, c)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Serial(nn.Module):
    def __init__(self, c, heads, ratio, cpe, crpe):
        super().__init__()
        self.cpe = cpe                        # shared: repeated in the state dict, as in timm
        self.norm1 = nn.LayerNorm(c, eps=1e-6)
        self.factoratt_crpe = Att(c, heads, crpe)
        self.norm2 = nn.LayerNorm(c, eps=1e-6)
        self.mlp = Mlp(c, int(c * ratio))

    def forward(self, x, h, w):
        if self.cpe is not None:
            x = self.cpe(x, h, w)
        x = x + self.factoratt_crpe(self.norm1(x), h, w)
        return x + self.mlp(self.norm2(x))


class Parallel(nn.Module):
    def __init__(self, dims, heads, ratio, crpes):
        super().__init__()
        for s in (2, 3, 4):
            setattr(self, "norm1%d" % s, nn.LayerNorm(dims[s - 1], eps=1e-6))
            setattr(self, "factoratt_crpe%d" % s, Att(dims[s - 1], heads, crpes[s - 1]))
            setattr(self, "norm2%d" % s, nn.LayerNorm(dims[s - 1], eps=1e-6))
        self.mlp2 = Mlp(dims[1], int(dims[1] * ratio))
        self.mlp3 = self.mlp2                 # one shared FFN under three names
        self.mlp4 = self.mlp2

    @staticmethod
    def rescale(x, h, w, factor):
        cls, img = to_grid(x, h, w)
        img = F.interpolate(img, scale_factor=factor, mode="bilinear", align_corners=False,
                            recompute_scale_factor=False)
        return from_grid(cls, img)

    def forward(self, xs, sizes):
        cur = [getattr(self, "factoratt_crpe%d" % s)(getattr(self, "norm1%d" % s)(x), *hw)
               for s, x, hw in zip((2, 3, 4), xs, sizes)]
        fused = []
        for i in range(3):
            acc = cur[i]
            for j in range(3):
                if j != i:
                    acc = acc + self.rescale(cur[j], *sizes[j], 2.0 ** (j - i))
            fused.append(acc)
        out = []
        for s, x, f in zip((2, 3, 4), xs, fused):
            x = x + f
            out.append(x + getattr(self, "mlp%d" % s)(getattr(self, "norm2%d" % s)(x)))
        return out


class RefCoat(nn.Module):
    def __init__(self, dims, depths, parallel, heads, ratios, classes):
        super().__init__()
        self.parallel = parallel
        for s in range(4):
            n = s + 1
            setattr(self, "patch_embed%d" % n, Embed(3 if s == 0 else dims[s - 1], dims[s], 4 if s == 0 else 2))
            setattr(self, "cls_token%d" % n, nn.Parameter(torch.zeros(1, 1, dims[s])))
            setattr(self, "cpe%d" % n, Cpe(dims[s]))
            setattr(self, "crpe%d" % n, Crpe(dims[s] // heads))
        for s in range(4):
            n = s + 1
            cpe, crpe = getattr(self, "cpe%d" % n), getattr(self, "crpe%d" % n)
            setattr(self, "serial_blocks%d" % n,
                    nn.ModuleList([Serial(dims[s], heads, ratios[s], cpe, crpe) for _ in range(depths[s])]))
        if parallel:
            crpes = [getattr(self, "crpe%d" % (s + 1)) for s in range(4)]
            self.parallel_blocks = nn.ModuleList([Parallel(dims, heads, ratios[1], crpes) for _ in range(parallel)])
            self.norm2 = nn.LayerNorm(dims[1], eps=1e-6)
            self.norm3 = nn.LayerNorm(dims[2], eps=1e-6)
            self.aggregate = nn.Conv1d(3, 1, 1)
        self.norm4 = nn.LayerNorm(dims[3], eps=1e-6)
        self.head = nn.Linear(dims[3], classes)

    def forward(self, x):
        b = x.shape[0]
        xs, sizes = [], []
        for s in range(4):
            n = s + 1
            t, h, w = getattr(self, "patch_embed%d" % n)(x)
            t = torch.cat([getattr(self, "cls_token%d" % n).expand(b, -1, -1), t], dim=1)
            for blk in getattr(self, "serial_blocks%d" % n):
                t = blk(t, h, w)
            xs.append(t)
            sizes.append((h, w))
            x = to_grid(t, h, w)[1]
        if not self.parallel:
            return self.head(self.norm4(xs[3])[:, 0])
        p = xs[1:]
        for blk in self.parallel_blocks:
            p = [getattr(self, "cpe%d" % s)(t, *hw) for s, t, hw in zip((2, 3, 4), p, sizes[1:])]
            p = blk(p, sizes[1:])
        cls = torch.stack([self.norm2(p[0])[:, 0], self.norm3(p[1])[:, 0], self.norm4(p[2])[:, 0]], dim=1)
        return self.head(self.aggregate(cls).squeeze(1))


def randomize(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif p.dim() >= 3:
                fan = p[0].numel()
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(fan))
            elif p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1]))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--out-dir", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--size", default="64x96")
    a = p.parse_args(argv)
    h, w = (int(v) for v in a.size.split("x"))
    os.makedirs(a.out_dir, exist_ok=True)
    gen = torch.Generator().manual_seed(a.seed)
    specs = {
        "lite": ([16, 16, 24, 32], [1, 2, 1, 1], 0, [2, 2, 3, 2]),
        "coat": ([16, 24, 24, 24], [1, 1, 1, 1], 2, [2, 3, 3, 3]),
    }
    models = {}
    for name, (dims, depths, par, ratios) in specs.items():
        m = RefCoat(dims, depths, par, 8, ratios, 11)
        randomize(m, gen)
        m.eval()
        x = torch.randn(1, 3, h, w, generator=gen)
        with torch.no_grad():
            logits = m(x)
        sd = m.state_dict()
        torch.save(sd if name == "lite" else {"model": sd, "epoch": 3}, os.path.join(a.out_dir, name + ".pth"))
        cl.write_trace(os.path.join(a.out_dir, name + "_ref.h5"), "coat_reference",
                       {"seed": a.seed, "torch": torch.__version__}, {"input": x, "logits": logits})
        models[name] = sd
    sd = dict(models["lite"])
    del sd["head.bias"]
    sd["extra.weight"] = torch.zeros(3)
    sd["norm4.weight"] = torch.zeros(5)
    torch.save(sd, os.path.join(a.out_dir, "broken.pth"))
    sd = dict(models["lite"])
    sd["serial_blocks2.1.cpe.proj.weight"] = sd["serial_blocks2.1.cpe.proj.weight"] + 1.0
    torch.save(sd, os.path.join(a.out_dir, "twins.pth"))
    print("reference CoaT models (seed %d, input %dx%d) in %s" % (a.seed, h, w, a.out_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
