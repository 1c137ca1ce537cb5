#!/usr/bin/env python3
"""Where a build's time went, from ninja's own log: seconds per part of the tree and per ladder.

    scripts/build-budget.py [BUILD_DIR] [--top N]

Reads BUILD_DIR/.ninja_log (default build/default), keeps the newest entry of each output, and groups the
outputs by what they belong to: a ladder (chapters/chNN_name/ladder), core, device, cli, serving, kernels,
the CPU and GPU tests. Prints the compile time of each group (the sum of its jobs' durations, i.e. CPU time
at one job per core) and the build's wall time (first start to last end of the newest build). Entries that
ccache served are short: a warm cache measures the cache, a fresh clone (CI) pays the cold numbers.
Exit code 0; 2 when the log is missing or unreadable.
"""
import os
import re
import sys
from collections import defaultdict


def group_of(output: str) -> str:
    m = re.search(r"chapters/(ch\d\d_[a-z0-9_]+)/([a-z0-9_]+)/", output)
    if m:
        return f"{m.group(1)}/{m.group(2)}"
    for part, name in (("tests/cpu/", "tests/cpu"), ("tests/gpu/", "tests/gpu"), ("core/", "core"),
                       ("device/", "device"), ("serving/", "serving"), ("cli/", "cli"), ("kernels/", "kernels")):
        if output.startswith(part) or f"/{part}" in output:
            return name
    return "other"


def main(argv):
    build = "build/default"
    top = 15
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--top" and args:
            top = int(args.pop(0))
        elif a in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        else:
            build = a
    path = os.path.join(build, ".ninja_log")
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError as e:
        print(f"build-budget: cannot read {path}: {e.strerror}", file=sys.stderr)
        return 2
    if not lines or not lines[0].startswith("# ninja log"):
        print(f"build-budget: {path} is not a ninja log", file=sys.stderr)
        return 2
    newest = {}  # output -> (start_ms, end_ms); later lines are newer
    for line in lines[1:]:
        fields = line.split("\t")
        if len(fields) < 4:
            continue
        newest[fields[3]] = (int(fields[0]), int(fields[1]))
    if not newest:
        print(f"build-budget: {path} has no entries", file=sys.stderr)
        return 2
    # Ninja's times count from the start of each invocation: after a fresh build (CI, a new clone) every
    # newest entry shares one time base and the wall time below is the build's; after incremental
    # rebuilds it mixes invocations and is only indicative. The compile times per group hold either way.
    per_group = defaultdict(float)
    jobs = defaultdict(int)
    for output, (start, end) in newest.items():
        g = group_of(output)
        per_group[g] += (end - start) / 1000.0
        jobs[g] += 1
    total = sum(per_group.values())
    wall = (max(e for _, e in newest.values()) - min(s for s, _ in newest.values())) / 1000.0
    ladders = {g: t for g, t in per_group.items() if g.startswith("ch")}
    print(f"build budget of {build}: {len(newest)} outputs, {total / 60:.1f} min of compile time "
          f"(sum over jobs), wall {wall / 60:.1f} min for the newest entries")
    print(f"  {'part':44s} {'seconds':>8s} {'share':>6s} {'jobs':>5s}")
    for g, t in sorted(((g, t) for g, t in per_group.items() if not g.startswith("ch")), key=lambda x: -x[1]):
        print(f"  {g:44s} {t:8.1f} {100 * t / total:5.1f}% {jobs[g]:5d}")
    lt = sum(ladders.values())
    print(f"  {'ladders (' + str(len(ladders)) + ')':44s} {lt:8.1f} {100 * lt / total:5.1f}% "
          f"{sum(jobs[g] for g in ladders):5d}")
    if ladders:
        print(f"  slowest ladders (mean {lt / len(ladders):.1f} s each):")
        for g, t in sorted(ladders.items(), key=lambda x: -x[1])[:top]:
            print(f"    {g:42s} {t:8.1f} {100 * t / total:5.1f}% {jobs[g]:5d}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
