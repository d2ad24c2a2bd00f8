#!/usr/bin/python3
"""Reference data for Glimpse's EfficientZero converter tests: a small network laid out as the
official EfficientZero code lays out its Atari model (YeWR/EfficientZero, config/atari/model.py:
parameter names, the unused modules it creates, its forward pass), written here in torch.nn
from the facts of that code, with random weights and random BatchNorm statistics.

Run with Debian's python3 (python3-torch, python3-h5py):

  efficientzero_reference.py --out-dir DIR [--seed S]

Writes to DIR:
  official.p       the state dict as the official trainer saves it (torch.save(model.state_dict())),
                   with what it carries that no output depends on: representation_network.conv/bn
                   (created even with downsampling), dynamics_network.reward_resblocks, and the
                   stem's conv2 registered twice (also as downsample_block.downsample)
  reference.h5     a glimpse.trace: input [2, 6, 32, 32] raw pixel values (0..255; the official
                   code divides by 255 before the network), the initial inference (state,
                   value_logits, policy_logits) and one recurrent inference from it (actions,
                   next_state, value_prefix_logits, next_value_logits, next_policy_logits,
                   lstm_h, lstm_c) from zero LSTM states, all in eval mode
  not_ez.p         a state dict of another model (refused)
  missing.p        official.p without prediction_network.fc_value.3.weight (refused)
  twins.p          official.p whose two copies of the stem's conv2 differ (refused)
  wrapped.p        official.p under {'model': ...} with 'module.' prefixes (converts)

Network: 2 stacked RGB frames of 32 x 32 (state 2 x 2 after the stem), 8 channels, 1 block,
reduced channels 4 / 4 / 6, heads [8] / [8] / [6], LSTM 16, supports of 11 bins (S = 5),
projection 16 / 16, head 8 -> 16, 4 actions.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import convert_letr as cl  # noqa: E402  (trace writing and the torch import are shared)

C, BLOCKS, STACK, OBS_C, SIDE, ACTIONS = 8, 1, 2, 3, 32, 4
RED_R, RED_V, RED_P = 4, 4, 6
FC_R, FC_V, FC_P = [8], [8], [6]
LSTM, BINS = 16, 11
PROJ_HID, PROJ_OUT, PRED_HID = 16, 16, 8


def build(torch):
    nn = torch.nn
    F = nn.functional

    def conv3(i, o, stride=1):
        return nn.Conv2d(i, o, 3, stride=stride, padding=1, bias=False)

    class Block(nn.Module):
        def __init__(self, i, o, stride=1, shortcut=None):
            super().__init__()
            self.conv1, self.bn1 = conv3(i, o, stride), nn.BatchNorm2d(o)
            self.conv2, self.bn2 = conv3(o, o), nn.BatchNorm2d(o)
            self.downsample = shortcut

        def forward(self, x):
            y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
            return F.relu(y + (x if self.downsample is None else self.downsample(x)))

    def head(i, hidden, o):
        layers = []
        for h in hidden:
            layers += [nn.Linear(i, h), nn.BatchNorm1d(h), nn.ReLU()]
            i = h
        return nn.Sequential(*layers, nn.Linear(i, o), nn.Identity())

    class Stem(nn.Module):
        def __init__(self, i, o):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(i, o // 2, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(o // 2)
            self.resblocks1 = nn.ModuleList([Block(o // 2, o // 2)])
            self.conv2 = nn.Conv2d(o // 2, o, 3, stride=2, padding=1, bias=False)
            self.downsample_block = Block(o // 2, o, stride=2, shortcut=self.conv2)
            self.resblocks2 = nn.ModuleList([Block(o, o)])
            self.pooling1 = nn.AvgPool2d(3, stride=2, padding=1)
            self.resblocks3 = nn.ModuleList([Block(o, o)])
            self.pooling2 = nn.AvgPool2d(3, stride=2, padding=1)

        def forward(self, x):
            x = F.relu(self.bn1(self.conv1(x)))
            for b in self.resblocks1:
                x = b(x)
            x = self.downsample_block(x)
            for b in self.resblocks2:
                x = b(x)
            x = self.pooling1(x)
            for b in self.resblocks3:
                x = b(x)
            return self.pooling2(x)

    class Representation(nn.Module):
        def __init__(self):
            super().__init__()
            self.downsample_net = Stem(STACK * OBS_C, C)
            self.conv, self.bn = conv3(STACK * OBS_C, C), nn.BatchNorm2d(C)   # created, unused
            self.resblocks = nn.ModuleList([Block(C, C) for _ in range(BLOCKS)])

        def forward(self, x):
            x = self.downsample_net(x)
            for b in self.resblocks:
                x = b(x)
            return x

    state_cells = (-(-SIDE // 16)) ** 2   # ceil(side / 16) squared, as the official sizes

    class Dynamics(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn = conv3(C + 1, C), nn.BatchNorm2d(C)
            self.resblocks = nn.ModuleList([Block(C, C) for _ in range(BLOCKS)])
            self.reward_resblocks = nn.ModuleList([Block(C, C) for _ in range(BLOCKS)])   # unused
            self.conv1x1_reward, self.bn_reward = nn.Conv2d(C, RED_R, 1), nn.BatchNorm2d(RED_R)
            self.lstm = nn.LSTM(input_size=RED_R * state_cells, hidden_size=LSTM)
            self.bn_value_prefix = nn.BatchNorm1d(LSTM)
            self.fc = head(LSTM, FC_R, BINS)

        def forward(self, x, hidden):
            s = x[:, :-1]
            x = F.relu(self.bn(self.conv(x)) + s)
            for b in self.resblocks:
                x = b(x)
            r = F.relu(self.bn_reward(self.conv1x1_reward(x))).reshape(x.shape[0], -1).unsqueeze(0)
            out, hidden = self.lstm(r, hidden)
            return x, hidden, self.fc(F.relu(self.bn_value_prefix(out.squeeze(0))))

    class Prediction(nn.Module):
        def __init__(self):
            super().__init__()
            self.resblocks = nn.ModuleList([Block(C, C) for _ in range(BLOCKS)])
            self.conv1x1_value, self.conv1x1_policy = nn.Conv2d(C, RED_V, 1), nn.Conv2d(C, RED_P, 1)
            self.bn_value, self.bn_policy = nn.BatchNorm2d(RED_V), nn.BatchNorm2d(RED_P)
            self.fc_value = head(RED_V * state_cells, FC_V, BINS)
            self.fc_policy = head(RED_P * state_cells, FC_P, ACTIONS)

        def forward(self, x):
            for b in self.resblocks:
                x = b(x)
            v = F.relu(self.bn_value(self.conv1x1_value(x))).flatten(1)
            p = F.relu(self.bn_policy(self.conv1x1_policy(x))).flatten(1)
            return self.fc_policy(p), self.fc_value(v)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.representation_network = Representation()
            self.dynamics_network = Dynamics()
            self.prediction_network = Prediction()
            self.projection = nn.Sequential(
                nn.Linear(C * state_cells, PROJ_HID), nn.BatchNorm1d(PROJ_HID), nn.ReLU(),
                nn.Linear(PROJ_HID, PROJ_HID), nn.BatchNorm1d(PROJ_HID), nn.ReLU(),
                nn.Linear(PROJ_HID, PROJ_OUT), nn.BatchNorm1d(PROJ_OUT))
            self.projection_head = nn.Sequential(
                nn.Linear(PROJ_OUT, PRED_HID), nn.BatchNorm1d(PRED_HID), nn.ReLU(), nn.Linear(PRED_HID, PROJ_OUT))

    return Net()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out-dir", required=True)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    cl.load_modules()
    torch = cl.torch
    torch.manual_seed(a.seed)
    net = build(torch)
    with torch.no_grad():
        for name, t in net.named_parameters():
            t.copy_(torch.randn_like(t) * (0.4 if t.dim() > 1 else 0.2))
        for m in net.modules():
            if isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
                m.running_mean.copy_(torch.randn_like(m.running_mean) * 0.2)
                m.running_var.copy_(torch.rand_like(m.running_var) + 0.5)
                m.num_batches_tracked.fill_(7)
    net.eval()
    os.makedirs(a.out_dir, exist_ok=True)
    out = lambda name: os.path.join(a.out_dir, name)  # noqa: E731
    sd = net.state_dict()
    torch.save(sd, out("official.p"))

    obs = torch.randint(0, 256, (2, STACK * OBS_C, SIDE, SIDE)).float()
    actions = torch.tensor([1, 3])
    with torch.no_grad():
        state = net.representation_network(obs / 255.0)
        policy, value = net.prediction_network(state)
        plane = actions.float()[:, None, None, None] * torch.ones(2, 1, state.shape[2], state.shape[3]) / ACTIONS
        zeros = (torch.zeros(1, 2, LSTM), torch.zeros(1, 2, LSTM))
        nxt, (h, c), prefix = net.dynamics_network(torch.cat([state, plane], 1), zeros)
        policy2, value2 = net.prediction_network(nxt)
    cl.write_trace(out("reference.h5"), "efficientzero", {"seed": a.seed}, {
        "input": obs, "state": state, "value_logits": value, "policy_logits": policy,
        "actions": actions.float(), "next_state": nxt, "value_prefix_logits": prefix,
        "next_value_logits": value2, "next_policy_logits": policy2, "lstm_h": h, "lstm_c": c})

    torch.save({"backbone.conv1.weight": torch.zeros(4, 3, 3, 3), "fc.weight": torch.zeros(2, 4)}, out("not_ez.p"))
    missing = dict(sd)
    del missing["prediction_network.fc_value.3.weight"]
    torch.save(missing, out("missing.p"))
    twins = dict(sd)
    twins["representation_network.downsample_net.conv2.weight"] = \
        twins["representation_network.downsample_net.conv2.weight"] + 1.0
    torch.save(twins, out("twins.p"))
    torch.save({"model": {"module." + k: v for k, v in sd.items()}}, out("wrapped.p"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
