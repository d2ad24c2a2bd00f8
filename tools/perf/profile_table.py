#!/usr/bin/python3
"""Sums a LibTorch operator profile (the Chrome trace that `glimpse bench coat --profile` and
`glimpse bench constellation --profile` write) per operator: self time (the operator's time minus
the operators it called on the same thread), total time, calls, and the share of the summed self
time.

  profile_table.py TRACE.json [--top 25]
"""
import argparse
import collections
import json
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace")
    p.add_argument("--top", type=int, default=25)
    a = p.parse_args()
    try:
        with open(a.trace) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"profile_table.py: {a.trace}: not a readable Chrome trace ({e})")
    events = data["traceEvents"] if isinstance(data, dict) else data
    spans = collections.defaultdict(list)   # thread -> [(start, end, name)]
    for e in events:
        if e.get("ph") == "X" and "dur" in e:
            spans[e.get("tid", 0)].append((float(e["ts"]), float(e["ts"]) + float(e["dur"]), e["name"]))
    self_t, total_t, calls = collections.Counter(), collections.Counter(), collections.Counter()
    for tid, ss in spans.items():
        ss.sort(key=lambda s: (s[0], -s[1]))
        stack = []   # [start, end, name, children time]
        def close(entry):
            s, e, name, child = entry
            self_t[name] += (e - s) - child
            if stack:
                stack[-1][3] += e - s
        for s, e, name in ss:
            while stack and stack[-1][1] <= s:
                close(stack.pop())
            stack.append([s, e, name, 0.0])
            total_t[name] += e - s
            calls[name] += 1
        while stack:
            close(stack.pop())
    whole = sum(self_t.values())
    if whole <= 0:
        sys.exit(f"profile_table.py: {a.trace}: no operator spans")
    print(f"{'operator':40s} {'self ms':>10s} {'share':>7s} {'total ms':>10s} {'calls':>7s}")
    for name, t in self_t.most_common(a.top):
        print(f"{name:40s} {t / 1e3:10.2f} {100 * t / whole:6.1f}% {total_t[name] / 1e3:10.2f} {calls[name]:7d}")
    print(f"{'(all operators)':40s} {whole / 1e3:10.2f}")


if __name__ == "__main__":
    main()
