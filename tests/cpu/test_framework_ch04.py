#!/usr/bin/env python3
"""scripts/framework/ch04_collectives.py's arithmetic, without torch or a GPU: nccl-tests' sizes and bus
factors, the same cases chapters/ch04_multi_gpu/collectives/cpu_test_collectives.cpp checks for the ladder
(so that the independent check and the ladder print comparable numbers), the size parser, and what its
timed window holds (run_op against fakes of torch and torch.distributed that log what they are asked)."""
import importlib.util
import pathlib
import sys
import unittest

_path = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "framework" / "ch04_collectives.py"
_spec = importlib.util.spec_from_file_location("ch04_collectives", _path)
cc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cc)


class BusFactor(unittest.TestCase):
    def test_factors_match_nccl_tests(self):
        self.assertAlmostEqual(cc.bus_factor("all_reduce", 8), 2 * 7 / 8)
        self.assertAlmostEqual(cc.bus_factor("all_gather", 8), 7 / 8)
        self.assertAlmostEqual(cc.bus_factor("reduce_scatter", 2), 1 / 2)
        self.assertAlmostEqual(cc.bus_factor("all_to_all", 4), 3 / 4)
        self.assertEqual(cc.bus_factor("broadcast", 8), 1.0)
        self.assertEqual(cc.bus_factor("send_recv", 2), 1.0)


class Counts(unittest.TestCase):
    def test_three_ranks_round_the_chunk_to_16_bytes(self):
        # 1 GiB over 3 ranks: chunks of 89478484 fp32, S = 1073741808 bytes, as nccl-tests prints it.
        for op in ("all_gather", "reduce_scatter", "all_to_all"):
            n_in, n_out, chunk, s = cc.counts(op, 1 << 30, 3)
            self.assertEqual(chunk, 89478484)
            self.assertEqual(s, 1073741808)
        self.assertEqual(cc.counts("all_gather", 1 << 30, 3)[:2], (89478484, 3 * 89478484))
        self.assertEqual(cc.counts("reduce_scatter", 1 << 30, 3)[:2], (3 * 89478484, 89478484))

    def test_unchunked_ops_use_the_whole_buffer(self):
        for op in ("all_reduce", "broadcast", "send_recv"):
            self.assertEqual(cc.counts(op, 4096, 8), (1024, 1024, 1024, 4096))

    def test_no_chunk_below_16_bytes_a_rank(self):
        self.assertIsNone(cc.counts("all_gather", 60, 4))
        self.assertIsNotNone(cc.counts("all_gather", 64, 4))


class ParseSize(unittest.TestCase):
    def test_suffixes(self):
        self.assertEqual(cc.parse_size("4K"), 4096)
        self.assertEqual(cc.parse_size("16M"), 16 << 20)
        self.assertEqual(cc.parse_size("1GiB"), 1 << 30)
        self.assertEqual(cc.parse_size("1024"), 1024)

    def test_refuses_what_is_not_fp32(self):
        for bad in ("3", "0", "6"):
            with self.assertRaises(ValueError):
                cc.parse_size(bad)


class _Tensor:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def copy_(self, src):
        self.log.append(f"copy {src.name} -> {self.name}")

    def fill_(self, value):
        pass

    def item(self):
        return 1e-3


class _Event:
    def __init__(self, log):
        self.log = log

    def record(self):
        self.log.append("record")

    def synchronize(self):
        pass

    def elapsed_time(self, other):
        return 1.0


class _Torch:
    """Just enough of torch for run_op's timing loop."""
    float32 = float64 = None

    def __init__(self, log):
        self.log = log
        outer = self

        class Cuda:
            @staticmethod
            def synchronize(dev):
                pass

            @staticmethod
            def Event(enable_timing):
                return _Event(outer.log)

        self.cuda = Cuda

    def device(self, kind, index):
        return (kind, index)

    def empty(self, n, device, dtype):
        return _Tensor(self.log, "out")

    def zeros(self, n, device, dtype):
        return _Tensor(self.log, "time")


class _Dist:
    class ReduceOp:
        MAX = "max"

    def __init__(self, log):
        self.log = log

    def barrier(self):
        self.log.append("barrier")

    def all_reduce(self, t, op=None):
        self.log.append("all_reduce" if t.name != "time" else "max of the times")

    def broadcast(self, t, src):
        self.log.append("broadcast")


class TimedWindow(unittest.TestCase):
    """Between the two event records of an iteration there is the collective and nothing else: the
    in-place ops' input is restored before the barrier (a 1 GiB copy timed with them made all_reduce and
    broadcast read 16% slower than NCCL on two H200s, 2026-11-29)."""

    def windows(self, op, rank):
        log = []  # what the fakes were asked to do, in order
        saved = cc.pattern, cc.check
        cc.pattern = lambda torch, dev, src, offset, count: _Tensor(log, "x")
        cc.check = lambda *args: True
        try:
            row = cc.run_op(_Torch(log), _Dist(log), op, 1 << 20, rank, 2, reps=3)
        finally:
            cc.pattern, cc.check = saved
        self.assertTrue(row["result_ok"])
        records = [i for i, e in enumerate(log) if e == "record"]
        self.assertEqual(len(records), 6)
        return log, [log[records[i] + 1:records[i + 1]] for i in range(0, 6, 2)]

    def test_all_reduce_times_only_the_all_reduce(self):
        log, windows = self.windows("all_reduce", 0)
        self.assertEqual(windows, [["all_reduce"]] * 3)
        self.assertEqual(log.count("copy x -> out"), 1 + 3 + 3)  # check, warm-up, each timed iteration

    def test_broadcast_root_restores_outside_the_window(self):
        log, windows = self.windows("broadcast", 0)
        self.assertEqual(windows, [["broadcast"]] * 3)
        self.assertIn("copy x -> out", log)
        _, windows = self.windows("broadcast", 1)
        self.assertEqual(windows, [["broadcast"]] * 3)


if __name__ == "__main__":
    sys.exit(unittest.main())
