#!/usr/bin/env python3
"""The framework baseline of ch16:paged_attention: PyTorch's decode attention on a contiguous KV cache.

What a user without a paged-attention kernel runs: one query token per sequence,
torch.nn.functional.scaled_dot_product_attention(q [B,H,1,D], k/v [B,KVH,S,D], enable_gqa=True), for every
SDPA backend this PyTorch build will run on that shape. Timed with CUDA events, L2 flushed before every
launch (the ladder's cold-L2 mode), median of --reps launches; throughput is the K and V bytes that must
be read (the ladder's declared work), so the numbers sit beside the ladder's.

Not the ladder's harness: no correctness gate beyond a comparison with the math backend, no audit; the
README says "framework baseline, measured by this script" next to the numbers it writes.

  python3 scripts/framework/ch16_decode_attention.py --out base.json \
      [--batch 64,1] [--context 8192,32768] [--update-readme chapters/ch16_production_inference/paged_attention/README.md]
"""
import argparse
import warnings
import datetime
import json
import os
import re
import statistics
import sys


def measure(torch, F, backend, batch, heads, kv_heads, head_dim, context, reps, flush):
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(1234)
    q = torch.empty(batch, heads, 1, head_dim, device=dev, dtype=torch.bfloat16).uniform_(-6, 6, generator=g)
    k = torch.empty(batch, kv_heads, context, head_dim, device=dev, dtype=torch.bfloat16).uniform_(-1, 1, generator=g)
    v = torch.empty_like(k).uniform_(-1, 1, generator=g)
    from torch.nn.attention import sdpa_kernel
    with sdpa_kernel([backend]):
        try:
            out = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        except RuntimeError as e:
            return {"error": str(e).splitlines()[0][:200]}
        # The check: the first (at most) two sequences against PyTorch's fp32 math path (all 64 in fp32
        # would need 32 GiB of scores at context 8192).
        n = min(batch, 2)
        with sdpa_kernel([torch.nn.attention.SDPBackend.MATH]):
            ref = F.scaled_dot_product_attention(q[:n].float(), k[:n].float(), v[:n].float(), enable_gqa=True)
        err = (out[:n].float() - ref).abs().max().item()
        del ref
        times = []
        for _ in range(3):
            F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        for _ in range(reps):
            flush.zero_()  # evicts K and V from L2: the ladder's cold mode
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record()
            F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) * 1e-3)
    kv_bytes = 2.0 * 2.0 * batch * context * kv_heads * head_dim
    med = statistics.median(times)
    return {"median_s": med, "kv_read_gbps": kv_bytes / med / 1e9, "max_abs_err_vs_fp32_math": err,
            "reps": reps}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", default="64,1")
    ap.add_argument("--context", default="8192,32768")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--update-readme", help="README whose framework-baseline block is rewritten")
    a = ap.parse_args()
    warnings.filterwarnings("ignore", category=UserWarning)  # PyTorch explains every backend it refuses
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend
    except ImportError as e:
        sys.exit(f"ch16_decode_attention: PyTorch with torch.nn.attention is needed ({e})")
    if not torch.cuda.is_available():
        sys.exit("ch16_decode_attention: no CUDA device")
    props = torch.cuda.get_device_properties(0)
    flush = torch.empty(int(2 * getattr(props, "L2_cache_size", 64 << 20)) // 4 + (1 << 20), device="cuda")
    backends = [b for b in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH")
                if hasattr(SDPBackend, b)]
    rows = []
    for batch in [int(x) for x in a.batch.split(",")]:
        for context in [int(x) for x in a.context.split(",")]:
            for name in backends:
                try:
                    r = measure(torch, F, getattr(SDPBackend, name), batch, a.heads, a.kv_heads, a.head_dim,
                                context, a.reps, flush)
                except RuntimeError as e:  # out of memory (the math path expands K/V per query head)
                    r = {"error": str(e).splitlines()[0][:200]}
                torch.cuda.empty_cache()
                r.update({"backend": name.lower(), "batch": batch, "context": context, "heads": a.heads,
                          "kv_heads": a.kv_heads, "head_dim": a.head_dim})
                rows.append(r)
                msg = r.get("error") or f"{r['median_s'] * 1e6:.1f} us, {r['kv_read_gbps']:.0f} GB/s"
                print(f"batch {batch} context {context} {name.lower()}: {msg}", flush=True)
    meta = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
            # The command as a reader would retype it: the output file by its name only, not the machine's path.
            "command": " ".join(os.path.basename(x) if x == a.out else x for x in sys.argv), "l2_flushed": True}
    with open(a.out, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    if a.update_readme:
        update_readme(a.update_readme, meta, rows)


def update_readme(path, meta, rows):
    lines = [f"**{meta['device']}** (PyTorch {meta['torch']}, CUDA {meta['cuda']}, cuDNN {meta['cudnn']}, "
             f"{meta['date_utc']}; L2 flushed before each launch; median): "
             f"`{meta['command']}`", "",
             "| batch | context | SDPA backend | median | K+V read |", "| --- | --- | --- | --- | --- |"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['batch']} | {r['context']} | {r['backend']} | refused: {r['error'][:80]} | - |")
        else:
            lines.append(f"| {r['batch']} | {r['context']} | {r['backend']} | {r['median_s'] * 1e6:.1f} us |"
                         f" {r['kv_read_gbps']:.0f} GB/s |")
    text = open(path).read()
    key = re.sub(r"[^a-z0-9]+", "_", meta["device"].lower()).strip("_")
    begin, end = f"<!-- aisp:framework:{key}:begin -->", f"<!-- aisp:framework:{key}:end -->"
    block = begin + "\n" + "\n".join(lines) + "\n" + end
    if begin in text:
        text = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: block, text, flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
