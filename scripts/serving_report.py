#!/usr/bin/env python3
"""Renders `aisp loadgen --out` JSON files as a markdown table into a README block (between
<!-- aisp:serving:KEY:begin --> and <!-- aisp:serving:KEY:end -->), so that no serving number is typed by
hand. One row per run (a rate of a sweep, or a concurrency). "server overhead" is the run's
summary.server_overhead.overhead_fraction (docs/serving.md), blank for servers that do not export the
engine's time counters (vLLM, SGLang, the fake engine) and for files written before it existed.

Files written by scripts/hf_generate_baseline.py (the `transformers` `generate` baseline on the same GPU and
weights) become a second table, each batch a row, with the ratio of the engine's concurrency-256 output
throughput (the loadgen row with at most 256 in flight) to the baseline's, for baseline batches of 64 or
more (the issue's reference configuration is batch 64; a batch-1 row is a latency reference).

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


def hf_rows(path, engine_c256):
    d = json.load(open(path))
    for r in d["results"]:
        if "error" in r:
            yield f"| `generate`, batch {r['batch']} | {d['input_len']}/{d['output_len']} | {r['error']} | | | |"
            continue
        # A batch-1 baseline measures latency, not throughput: no ratio against a 256-wide engine.
        ratio = "" if engine_c256 is None or r["batch"] < 64 else f"{engine_c256 / r['output_tokens_per_s']:.1f}x"
        decode = "" if r.get("decode_ms_per_token") is None else f"{r['decode_ms_per_token']:.1f}"
        yield (f"| `generate`, batch {r['batch']} ({d['attn']}, transformers {d['transformers']}) | "
               f"{d['input_len']}/{d['output_len']} | {r['output_tokens_per_s']:.0f} | {decode} | "
               f"{r['prefill_s'] * 1e3:.0f} | {ratio} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--key", required=True, help="block name, e.g. the hardware key h100_sxm")
    ap.add_argument("--device", required=True)
    ap.add_argument("--command", required=True, help="how the runs were made (quoted in the block)")
    ap.add_argument("--readme", required=True)
    ap.add_argument("json", nargs="+")
    a = ap.parse_args()
    first = next(p for p in a.json if json.load(open(p)).get("tool") != "hf_generate_baseline")
    slo = json.load(open(first))["config"]["slo_ms"]
    slo_text = ", ".join(f"{k} <= {v:g} ms" for k, v in slo.items() if v is not None) or "none"
    lines = [f"**{a.device}**, model `{json.load(open(first))['model']}`; {a.command}; goodput SLO: {slo_text}.", "",
             "| load | done | in/out tokens | req/s | out tok/s | TTFT p50 ms | TTFT p99 ms | TPOT p50 ms | "
             "TPOT p99 ms | ITL p99 ms | E2E p50 ms | goodput req/s | server overhead |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    loadgen = [p for p in a.json if json.load(open(p)).get("tool") != "hf_generate_baseline"]
    baselines = [p for p in a.json if p not in loadgen]
    engine_c256 = None
    for p in loadgen:
        lines.extend(rows(p))
        for r in json.load(open(p))["runs"]:
            if r.get("max_concurrency") == 256:
                engine_c256 = r["summary"]["output_throughput"]
    if baselines:
        lines += ["", "The `transformers` baseline on the same GPU and weights (scripts/hf_generate_baseline.py; "
                  "one batch of random prompts, every sequence generating all its tokens):", "",
                  "| baseline | in/out tokens | out tok/s | decode ms/token | prefill ms | engine at concurrency 256 / baseline |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for p in baselines:
            lines.extend(hf_rows(p, engine_c256))
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
