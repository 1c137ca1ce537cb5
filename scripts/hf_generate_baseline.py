#!/usr/bin/env python3
"""The framework baseline for the serving engine (issue 15): Hugging Face `transformers` `generate` on the
same model folder and GPU, measured the way `aisp loadgen` measures the engine.

For each batch size B it draws B random prompts of exactly --input-len token ids (uniform in
[--vocab-low, vocab), as loadgen's random prompts; no padding, attention_mask all ones) and runs greedy
`model.generate` for exactly --output-len new tokens (EOS ignored, as serving benchmarks do with random
weights), bf16, eval mode, under torch.inference_mode(), with transformers' default (dynamic) KV cache.

Per batch size it reports (medians over --repeats, every repeat listed in the JSON):
  total_s               wall clock of the whole generate, prefill included (cuda synchronize around it)
  output_tokens_per_s   B * output_len / total_s: loadgen's output throughput at concurrency B
  prefill_s             a generate with max_new_tokens=1 (the prompt pass and its one token)
  decode_ms_per_token   (total_s - prefill_s) / (output_len - 1): one decode step of the whole batch
  peak_mem_gib          torch.cuda.max_memory_allocated over that batch size's runs
An out-of-memory at one batch size is reported for it and the next batch size still runs. Exit status: 0
if at least one batch size ran, 3 if none did, 2 on bad input.

Needs torch, transformers and safetensors; no network. For example (issue 15's bound is the engine's
output throughput at concurrency 256, 512 in / 256 out, against this script's at batch 256):
    python3 scripts/hf_generate_baseline.py --model DIR --batch 1,64,256 --input-len 512 --output-len 256 \
        --out hf_baseline.json
--device cpu works (no synchronize, no memory figures) for checking the script without a GPU.
"""
import argparse
import gc
import json
import os
import statistics
import sys
import time

TOOL = "hf_generate_baseline"


class Parser(argparse.ArgumentParser):
    # Bad input is one line and exit 2, like the C++ tools' UsageError (argparse prints the usage too).
    def error(self, message):
        fail(message)


def fail(message, status=2):
    print(f"{TOOL}: {message}", file=sys.stderr)
    sys.exit(status)


def progress(t0, message):
    print(f"[{time.monotonic() - t0:8.1f}s] {message}", file=sys.stderr, flush=True)


def parse_batches(text):
    try:
        batches = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        fail(f"--batch {text!r}: expected N[,N...] of positive integers")
    if not batches or any(b <= 0 for b in batches):
        fail(f"--batch {text!r}: every batch size must be >= 1")
    return batches


def read_config(model_dir):
    """Checks the folder before torch is imported (seconds), so bad input fails fast."""
    if not os.path.isdir(model_dir):
        fail(f"no such model folder: {model_dir}")
    path = os.path.join(model_dir, "config.json")
    if not os.path.isfile(path):
        fail(f"{model_dir} has no config.json")
    try:
        with open(path) as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: not readable JSON ({e})")
    if not isinstance(config, dict) or not isinstance(config.get("vocab_size"), int):
        fail(f"{path}: no integer vocab_size")
    return config


def is_oom(error):
    import torch
    return isinstance(error, torch.OutOfMemoryError) or "out of memory" in str(error).lower()


class Runner:
    """Owns the model and the timing rules, so that every measured generate is run the same way."""

    def __init__(self, model, device, pad_token_id):
        self.m_model = model
        self.m_device = device
        self.m_pad = pad_token_id

    def sync(self):
        import torch
        if self.m_device.type == "cuda":
            torch.cuda.synchronize(self.m_device)

    def generate(self, ids, new_tokens):
        """Timed greedy generate of exactly `new_tokens` tokens per sequence; returns seconds."""
        import torch
        mask = torch.ones_like(ids)
        self.sync()
        start = time.perf_counter()
        # min_new_tokens = max_new_tokens with eos_token_id None: no sequence may stop early, whatever the
        # model's generation_config says (random weights emit EOS like any other token).
        out = self.m_model.generate(input_ids=ids, attention_mask=mask, do_sample=False, num_beams=1,
                                    max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                    eos_token_id=None, pad_token_id=self.m_pad)
        self.sync()
        seconds = time.perf_counter() - start
        got = out.shape[1] - ids.shape[1]
        if got != new_tokens:
            # Not a timing to report: fewer tokens would inflate tokens/s.
            raise RuntimeError(f"generate returned {got} new tokens, not {new_tokens}")
        return seconds


def measure_batch(runner, args, vocab, batch, t0):
    import torch
    g = torch.Generator().manual_seed(args.seed)
    ids = torch.randint(args.vocab_low, vocab, (batch, args.input_len), generator=g,
                        dtype=torch.int64).to(runner.m_device)
    cuda = runner.m_device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats(runner.m_device)
    # Untimed and short: the first generate of a shape pays for the allocator's growth and kernel choice.
    runner.generate(ids, min(2, args.output_len))
    progress(t0, f"batch {batch}: warm-up done")
    prefill = []
    for r in range(args.repeats):
        prefill.append(runner.generate(ids, 1))
        progress(t0, f"batch {batch}: prefill {r + 1}/{args.repeats}: {prefill[-1]:.3f} s")
    total = []
    for r in range(args.repeats):
        total.append(runner.generate(ids, args.output_len))
        progress(t0, f"batch {batch}: generate {r + 1}/{args.repeats}: {total[-1]:.3f} s "
                     f"({batch * args.output_len / total[-1]:.1f} tok/s)")
    total_s = statistics.median(total)
    prefill_s = statistics.median(prefill)
    decode = (total_s - prefill_s) / (args.output_len - 1) * 1e3 if args.output_len > 1 else None
    return {"batch": batch, "repeats_s": total, "prefill_repeats_s": prefill, "total_s": total_s,
            "prefill_s": prefill_s, "decode_ms_per_token": decode,
            "output_tokens_per_s": batch * args.output_len / total_s,
            "peak_mem_gib": torch.cuda.max_memory_allocated(runner.m_device) / 2**30 if cuda else None}


def load_model(args):
    import torch
    from transformers import AutoModelForCausalLM
    try:  # transformers 5 names it dtype; 4.x torch_dtype
        model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16,
                                                     attn_implementation=args.attn)
    except TypeError:
        model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.bfloat16,
                                                     attn_implementation=args.attn)
    model = model.to(args.device).eval()
    if next(model.parameters()).dtype != torch.bfloat16:
        fail(f"model loaded as {next(model.parameters()).dtype}, not bf16", 1)
    # Neither the folder's generation_config nor a default may end a sequence early or sample.
    model.generation_config.eos_token_id = None
    model.generation_config.do_sample = False
    return model


def print_table(results, args):
    print(f"transformers generate, {args.attn} attention, bf16, {args.input_len} in / {args.output_len} out, "
          f"median of {args.repeats}")
    print(f"{'batch':>6} {'total s':>9} {'prefill s':>10} {'decode ms/tok':>14} {'out tok/s':>10} {'peak GiB':>9}")
    for r in results:
        if "error" in r:
            print(f"{r['batch']:>6} {r['error']}")
            continue
        decode = f"{r['decode_ms_per_token']:.2f}" if r["decode_ms_per_token"] is not None else "-"
        peak = f"{r['peak_mem_gib']:.2f}" if r["peak_mem_gib"] is not None else "-"
        print(f"{r['batch']:>6} {r['total_s']:>9.3f} {r['prefill_s']:>10.3f} {decode:>14} "
              f"{r['output_tokens_per_s']:>10.1f} {peak:>9}")


def main():
    p = Parser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="model folder (Hugging Face layout: config.json + *.safetensors)")
    p.add_argument("--batch", default="1", help="batch sizes N[,N...], each one run of concurrency N")
    p.add_argument("--input-len", type=int, default=512, help="prompt tokens per sequence")
    p.add_argument("--output-len", type=int, default=256, help="generated tokens per sequence (EOS ignored)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs per batch size; the median is reported")
    p.add_argument("--seed", type=int, default=0, help="seed of the prompts")
    p.add_argument("--vocab-low", type=int, default=1000,
                   help="prompt ids are drawn from [this, vocab), as aisp loadgen's (keeps special tokens out)")
    p.add_argument("--attn", choices=["sdpa", "eager"], default="sdpa", help="transformers attention implementation")
    p.add_argument("--out", help="JSON results file")
    p.add_argument("--device", default="cuda:0", help="cuda:N, or cpu to check the script without a GPU")
    args = p.parse_args()

    batches = parse_batches(args.batch)
    for name in ("input_len", "output_len", "repeats"):
        if getattr(args, name) < 1:
            fail(f"--{name.replace('_', '-')} must be >= 1")
    config = read_config(args.model)
    vocab = config["vocab_size"]
    if not 0 <= args.vocab_low < vocab:
        fail(f"empty token range [{args.vocab_low}, {vocab}): check --vocab-low")
    max_pos = config.get("max_position_embeddings")
    if isinstance(max_pos, int) and args.input_len + args.output_len > max_pos:
        fail(f"--input-len + --output-len = {args.input_len + args.output_len} exceeds the model's "
             f"max_position_embeddings {max_pos}")

    t0 = time.monotonic()
    import torch
    import transformers
    try:
        device = torch.device(args.device)
    except RuntimeError:
        fail(f"--device {args.device!r}: expected cpu or cuda:N")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            fail("no CUDA device (use --device cpu to check the script without a GPU)")
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        if device.index >= torch.cuda.device_count():
            fail(f"--device {args.device}: only {torch.cuda.device_count()} CUDA devices")
        torch.cuda.set_device(device)
        device_name = torch.cuda.get_device_name(device)
    elif device.type == "cpu":
        device_name = "cpu"
    else:
        fail(f"--device {args.device!r}: expected cpu or cuda:N")
    args.device = str(device)
    progress(t0, f"loading {args.model} ({args.attn}, bf16) on {device_name}")
    model = load_model(args)
    pad = config.get("pad_token_id")
    runner = Runner(model, device, pad if isinstance(pad, int) else 0)
    progress(t0, f"loaded; transformers {transformers.__version__}, torch {torch.__version__}")

    results = []
    with torch.inference_mode():
        for batch in batches:
            progress(t0, f"batch {batch}: {batch} x {args.input_len} prompt tokens, {args.output_len} new tokens each")
            oom = False
            try:
                results.append(measure_batch(runner, args, vocab, batch, t0))
            except RuntimeError as e:  # torch.OutOfMemoryError is a RuntimeError
                if not is_oom(e):
                    raise
                oom = True
            if oom:
                # Outside the except block, so the traceback's frames (and their tensors) are already gone.
                gc.collect()
                if device.type == "cuda":
                    torch.cuda.empty_cache()
                results.append({"batch": batch, "error": "out of memory"})
                progress(t0, f"batch {batch}: out of memory")

    report = {"tool": TOOL, "transformers": transformers.__version__, "torch": torch.__version__,
              "device": device_name, "model": os.path.abspath(args.model), "dtype": "bf16", "attn": args.attn,
              "kv_cache": "dynamic (transformers default)", "input_len": args.input_len,
              "output_len": args.output_len, "repeats": args.repeats, "seed": args.seed,
              "vocab_low": args.vocab_low, "vocab": vocab, "results": results}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
        progress(t0, f"wrote {args.out}")
    print_table(results, args)
    sys.exit(0 if any("error" not in r for r in results) else 3)


if __name__ == "__main__":
    main()
