#!/usr/bin/env python3
"""The independent check of ch04:allreduce and ch04:collectives: the same collectives through PyTorch's
torch.distributed (NCCL backend), one process per GPU, with nccl-tests' sizes and bandwidth definitions.

What a PyTorch user measures on the same machine, by another stack than the ladders' (which drive every
rank from one process and load NCCL themselves): all_reduce, all_gather_into_tensor, reduce_scatter_tensor,
broadcast (root 0), all_to_all_single, and a send/recv ring (rank r sends to r + 1, receives from r - 1,
as nccl-tests' sendrecv_perf). Sizes are nccl-tests' S in bytes (its -b/-e), fp32 data; the chunked
collectives cut S into one 16-byte-aligned chunk per rank as nccl-tests and the ladder do.
algbw = S / t, busbw = algbw x factor (2(n-1)/n for all-reduce; (n-1)/n for all-gather, reduce-scatter,
all-to-all; 1 for broadcast and send/recv): chapters/ch04_multi_gpu/common/bus_bandwidth.hpp.

Timing: every rank waits at a barrier, then times one collective with CUDA events on its stream; the
iteration's time is the slowest rank's (a MAX all-reduce of the times), as the ladders time the slowest
rank; the median over --reps iterations is reported. Warm (no L2 flush), as the ch04 ladders time by
default (their hot mode), and with a barrier before each launch (nccl-tests averages
back-to-back launches instead: at small sizes this script's times include the ranks' start skew).

Not the ladders' harness: no correctness gate beyond checking each result once, exactly, against the
expected values (the check column), no audit. Needs two or more GPUs; with one it says so and exits 0 (--allow-one-rank runs it
anyway, as a smoke test of the script: the bus bandwidth of one rank is 0 by definition).

  python3 scripts/framework/ch04_collectives.py --out torch_collectives.json \\
      [--ops all_reduce,all_gather,reduce_scatter,broadcast,all_to_all,send_recv] [--sizes 4K,256K,16M,1G] \\
      [--ranks N] [--reps 20]
"""
import argparse
import datetime
import json
import os
import socket
import statistics
import sys

OPS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv"]
CHUNKED = {"all_gather", "reduce_scatter", "all_to_all"}


def bus_factor(op, ranks):
    if op == "all_reduce":
        return 2.0 * (ranks - 1) / ranks
    if op in CHUNKED:
        return (ranks - 1) / ranks
    return 1.0


def parse_size(text):
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().rstrip("B").rstrip("I")
    unit = t[-1] if t and t[-1] in units else ""
    value = int(t[:-1] if unit else t)
    size = value * units[unit]
    if size < 4 or size % 4:
        raise ValueError(f"size {text}: a positive multiple of 4 bytes (fp32)")
    return size


def counts(op, size, ranks):
    """(elements of the input, of the output, of the chunk, S in bytes) under nccl-tests' conventions."""
    n = size // 4
    if op not in CHUNKED:
        return n, n, n, 4 * n
    chunk = n // ranks // 4 * 4
    if chunk == 0:
        return None
    total = chunk * ranks
    if op == "all_gather":
        return chunk, total, chunk, 4 * total
    if op == "reduce_scatter":
        return total, chunk, chunk, 4 * total
    return total, total, chunk, 4 * total  # all_to_all


def run_op(torch, dist, op, size, rank, ranks, reps):
    shape = counts(op, size, ranks)
    if shape is None:
        return {"op": op, "size_bytes": size, "skipped": f"no 16-byte chunk over {ranks} ranks"}
    n_in, n_out, chunk, s_bytes = shape
    dev = torch.device("cuda", rank)
    x = pattern(torch, dev, rank, 0, n_in)
    out = torch.empty(n_out, device=dev, dtype=torch.float32)
    right, left = (rank + 1) % ranks, (rank - 1) % ranks

    def prepare():
        # all_reduce and broadcast work in place: their input is restored before each launch, outside the
        # timed window (a 1 GiB device copy is ~0.5 ms on an H200; timed, it made both ops look 16% slower
        # than the ladders' out-of-place NCCL calls).
        if op == "all_reduce" or (op == "broadcast" and rank == 0):
            out.copy_(x)

    def launch():
        if op == "all_reduce":
            dist.all_reduce(out)
        elif op == "all_gather":
            dist.all_gather_into_tensor(out, x)
        elif op == "reduce_scatter":
            dist.reduce_scatter_tensor(out, x)
        elif op == "broadcast":
            dist.broadcast(out, src=0)
        elif op == "all_to_all":
            dist.all_to_all_single(out, x)
        else:
            reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, x, right), dist.P2POp(dist.irecv, out, left)])
            for r in reqs:
                r.wait()

    prepare()
    launch()
    torch.cuda.synchronize(dev)
    ok = check(torch, op, out, x, rank, ranks, chunk)
    for _ in range(3):
        prepare()
        launch()
    times = []
    t = torch.zeros(1, device=dev, dtype=torch.float64)
    for _ in range(reps):
        prepare()
        dist.barrier()
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        launch()
        stop.record()
        stop.synchronize()
        t.fill_(start.elapsed_time(stop) * 1e-3)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank's time
        times.append(t.item())
    med = statistics.median(times)
    algbw = s_bytes / med / 1e9
    return {"op": op, "size_bytes": size, "s_bytes": s_bytes, "ranks": ranks, "median_s": med,
            "min_s": min(times), "max_s": max(times), "reps": reps, "algbw_gbps": algbw,
            "busbw_gbps": algbw * bus_factor(op, ranks), "result_ok": ok}


def pattern(torch, dev, src, offset, count):
    """Rank src's input at elements offset .. offset + count - 1: src + 1 + (i mod 1024) / 1024, distinct
    per rank and exact in fp32, and so are its sums over up to 8 ranks (below 2^7 with 10 fraction bits)."""
    i = torch.arange(offset, offset + count, device=dev, dtype=torch.int64) % 1024
    return i.to(torch.float32) / 1024.0 + float(src + 1)


def check(torch, op, out, x, rank, ranks, chunk):
    """The result against what the collective must produce, element for element: every value here is
    exact in fp32 (pattern()), so the check is exact whatever order NCCL adds in."""
    dev, n = out.device, out.numel()

    def per_chunk(offset_of):  # out[j c + i] = pattern(j, offset_of(j) + i)
        return torch.cat([pattern(torch, dev, j, offset_of(j), chunk) for j in range(ranks)])

    if op == "all_reduce":
        want = sum(pattern(torch, dev, j, 0, n) for j in range(ranks))
    elif op == "all_gather":
        want = per_chunk(lambda j: 0)
    elif op == "reduce_scatter":
        want = sum(pattern(torch, dev, j, rank * chunk, n) for j in range(ranks))
    elif op == "broadcast":
        want = pattern(torch, dev, 0, 0, n)
    elif op == "all_to_all":
        want = per_chunk(lambda j: rank * chunk)
    else:
        want = pattern(torch, dev, (rank - 1) % ranks, 0, n)
    return bool(torch.equal(out, want))


def worker(rank, ranks, port, ops, sizes, reps, queue):
    import torch
    import torch.distributed as dist
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ranks,
                            device_id=torch.device("cuda", rank))
    rows = []
    try:
        for op in ops:
            for size in sizes:
                rows.append(run_op(torch, dist, op, size, rank, ranks, reps))
                dist.barrier()
    finally:
        dist.destroy_process_group()
    if rank == 0:
        queue.put(rows)


def nccl_version(torch):
    v = torch.cuda.nccl.version()  # a tuple (2, 28, 9) in recent PyTorch, an int 22809 in older ones
    if isinstance(v, int):
        return f"{v // 10000}.{v // 100 % 100}.{v % 100}"
    return ".".join(str(p) for p in v)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--ops", default=",".join(OPS), help="comma-separated, of: " + ", ".join(OPS))
    ap.add_argument("--sizes", default="4K,256K,16M,1G", help="nccl-tests' sizes S in bytes (K, M, G suffixes)")
    ap.add_argument("--ranks", type=int, default=0, help="GPUs taking part (0: every visible GPU)")
    ap.add_argument("--reps", type=int, default=20, help="timed iterations per point (median reported)")
    ap.add_argument("--allow-one-rank", action="store_true", help="run on one GPU anyway (a smoke test)")
    args = ap.parse_args()
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    bad = [o for o in ops if o not in OPS]
    if bad:
        sys.exit(f"ch04_collectives.py: unknown op(s) {', '.join(bad)}; known: {', '.join(OPS)}")
    try:
        sizes = [parse_size(s) for s in args.sizes.split(",")]
    except ValueError as e:
        sys.exit(f"ch04_collectives.py: {e}")
    if args.reps < 1:
        sys.exit("ch04_collectives.py: --reps must be at least 1")

    import torch
    import torch.multiprocessing as mp
    visible = torch.cuda.device_count()
    ranks = args.ranks or visible
    if ranks > visible:
        sys.exit(f"ch04_collectives.py: --ranks {ranks} but {visible} GPU(s) visible")
    result = {"script": "scripts/framework/ch04_collectives.py", "torch": torch.__version__,
              "nccl": nccl_version(torch) if visible else None,
              "gpu": torch.cuda.get_device_name(0) if visible else None, "ranks": ranks,
              "utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "rows": []}
    if ranks < 2 and not args.allow_one_rank:
        result["skipped"] = f"needs two or more GPUs (found {visible})"
        print(f"ch04_collectives.py: {result['skipped']}; nothing measured")
    else:
        os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # never NVLink multicast on these machines
        queue = mp.get_context("spawn").SimpleQueue()
        mp.spawn(worker, args=(ranks, free_port(), ops, sizes, args.reps, queue), nprocs=ranks, join=True)
        result["rows"] = queue.get()
        print(f"torch.distributed (NCCL {result['nccl']}) on {ranks} x {result['gpu']}, median of {args.reps}")
        print(f"{'op':<15}{'S bytes':>14}{'time us':>12}{'algbw GB/s':>12}{'busbw GB/s':>12}  check")
        for r in result["rows"]:
            if "skipped" in r:
                print(f"{r['op']:<15}{r['size_bytes']:>14}  skipped: {r['skipped']}")
                continue
            print(f"{r['op']:<15}{r['s_bytes']:>14}{r['median_s'] * 1e6:>12.2f}{r['algbw_gbps']:>12.2f}"
                  f"{r['busbw_gbps']:>12.2f}  {'ok' if r['result_ok'] else 'WRONG'}")
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    if any(not r.get("result_ok", True) for r in result["rows"]):
        sys.exit("ch04_collectives.py: a collective's result was wrong (see the check column)")


if __name__ == "__main__":
    main()
