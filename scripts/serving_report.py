#!/usr/bin/env python3
"""Renders `aisp loadgen --out` JSON files as a markdown table into a README block (between
<!-- aisp:serving:KEY:begin --> and <!-- aisp:serving:KEY:end -->), so that no serving number is typed by
hand. One row per run (a rate of a sweep, or a concurrency). "server overhead" is the run's
summary.server_overhead.overhead_fraction (docs/serving.md), blank for servers that do not export the
engine's time counters (vLLM, SGLang, the fake engine) and for files written before it existed.

  python3 scripts/serving_report.py --key h100_sxm --device "NVIDIA H100 80GB HBM3" --command "..." \
      --readme docs/serving.md docs/results/serving/*.json
"""
import argparse
import json
import re
import sys


def overhead_cell(summary):
    fraction = (summary.get("server_overhead") or {}).get("overhead_fraction")
    return "" if fraction is None else f"{100 * fraction:.1f}%"


def rows(path):
    d = json.load(open(path))
    cfg = d["config"]
    for r in d["runs"]:
        s = r["summary"]
        load = f"rate {r['rate']:g}/s" if r.get("rate") not in (None, float("inf")) and r.get("max_concurrency", 0) == 0 \
            else f"concurrency {r.get('max_concurrency')}"
        yield (f"| {load} | {s['completed']}/{s['requests']} | {cfg['input_len']}/{cfg['output_len']} | "
               f"{s['request_throughput']:.2f} | {s['output_throughput']:.0f} | {s['ttft_ms']['p50']:.1f} | "
               f"{s['ttft_ms']['p99']:.1f} | {s['tpot_ms']['p50']:.2f} | {s['tpot_ms']['p99']:.2f} | "
               f"{s['itl_ms']['p99']:.1f} | {s['e2el_ms']['p50']:.0f} | {'' if s['goodput'] is None else format(s['goodput'], '.2f')} | {overhead_cell(s)} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--key", required=True, help="block name, e.g. the hardware key h100_sxm")
    ap.add_argument("--device", required=True)
    ap.add_argument("--command", required=True, help="how the runs were made (quoted in the block)")
    ap.add_argument("--readme", required=True)
    ap.add_argument("json", nargs="+")
    a = ap.parse_args()
    slo = json.load(open(a.json[0]))["config"]["slo_ms"]
    slo_text = ", ".join(f"{k} <= {v:g} ms" for k, v in slo.items() if v is not None) or "none"
    lines = [f"**{a.device}**, model `{json.load(open(a.json[0]))['model']}`; {a.command}; goodput SLO: {slo_text}.", "",
             "| load | done | in/out tokens | req/s | out tok/s | TTFT p50 ms | TTFT p99 ms | TPOT p50 ms | "
             "TPOT p99 ms | ITL p99 ms | E2E p50 ms | goodput req/s | server overhead |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for p in a.json:
        lines.extend(rows(p))
    begin, end = f"<!-- aisp:serving:{a.key}:begin -->", f"<!-- aisp:serving:{a.key}:end -->"
    block = begin + "\n" + "\n".join(lines) + "\n" + end
    text = open(a.readme).read()
    if begin in text:
        text = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: block, text, flags=re.S)
    else:
        sys.exit(f"serving_report: {a.readme} has no {begin} block")
    open(a.readme, "w").write(text)


if __name__ == "__main__":
    main()
