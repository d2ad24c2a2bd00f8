#!/usr/bin/env python3
"""Replays libFuzzer artifacts (crash-*, timeout-*, oom-*, leak-*) of one target and sorts them
by where they stop: the first stack frame outside the sanitizer runtime and the C library.
A finding whose first such frame lies in a system library (libhdf5, ...) is that library's; one
in a Glimpse source file is ours and must become a fix and a regression test (docs/fuzzing.md).

    tools/fuzz_triage.py BUILD/fuzz/fuzz_episode ARTIFACT_DIR [--timeout S]

Prints one line per artifact ("kind  owner  first-frame") and a summary per owner; exits 1 when
any finding is ours (or cannot be placed).
"""
import argparse
import collections
import os
import re
import subprocess
import sys

FRAME = re.compile(r"^\s*#(\d+) 0x[0-9a-f]+ in (\S+)(.*)$")
# Frames that say nothing about whose code failed.
NOISE = ("__asan", "__interceptor", "__sanitizer", "__ubsan", "__lsan", "fuzzer::", "memcpy", "memmove",
         "memset", "strlen", "strdup", "malloc", "calloc", "realloc", "free", "operator new", "operator delete",
         "__libc", "raise", "abort", "__GI_", "_start", "main", "LLVMFuzzerTestOneInput")


def frames(text):
    out = []
    for line in text.splitlines():
        m = FRAME.match(line)
        if m:
            out.append((m.group(2), m.group(3).strip()))
    return out


def owner(frame):
    func, where = frame
    if "libhdf5" in where or func.startswith("H5"):
        return "libhdf5"
    m = re.search(r"\((/[^)+]+)\+0x", where)
    if m:
        return os.path.basename(m.group(1))
    if "/usr/include/" in where or "/usr/lib/" in where:
        return "system headers"
    return "glimpse"


def first_useful(fs):
    for f in fs:
        if not any(f[0].startswith(n) or n in f[0] for n in NOISE):
            return f
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("artifacts")
    ap.add_argument("--timeout", type=int, default=10)
    a = ap.parse_args()
    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1:allocator_may_return_null=1:symbolize=1")
    counts = collections.Counter()
    ours = False
    for name in sorted(os.listdir(a.artifacts)):
        kind = name.split("-", 1)[0]
        if kind not in ("crash", "timeout", "oom", "leak", "slow"):
            continue
        path = os.path.join(a.artifacts, name)
        args = [a.binary, "-runs=1", f"-timeout={a.timeout}", "-rss_limit_mb=3072", "-malloc_limit_mb=3072", path]
        try:
            r = subprocess.run(args, capture_output=True, text=True, errors="replace", env=env,
                               timeout=a.timeout * 6 + 30)
            text = r.stdout + r.stderr
            status = "reproduced" if r.returncode != 0 else "passes now"
        except subprocess.TimeoutExpired as e:
            text = (e.stdout or "") + (e.stderr or "") if isinstance(e.stdout, str) else ""
            status = "hung"
        f = first_useful(frames(text))
        who = owner(f) if f else ("-" if status == "passes now" else "unplaced")
        if who in ("glimpse", "unplaced"):
            ours = True
        counts[(kind, who)] += 1
        shown = f"{f[0]} {f[1]}"[:140] if f else ""
        print(f"{kind:8} {who:16} {status:11} {name[:24]}  {shown}")
    print("\nsummary:")
    for (kind, who), n in sorted(counts.items()):
        print(f"  {kind:8} {who:16} {n}")
    return 1 if ours else 0


if __name__ == "__main__":
    sys.exit(main())
