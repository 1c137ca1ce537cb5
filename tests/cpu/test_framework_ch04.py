#!/usr/bin/env python3
"""scripts/framework/ch04_collectives.py's arithmetic, without torch or a GPU: nccl-tests' sizes and bus
factors, the same cases chapters/ch04_multi_gpu/collectives/cpu_test_collectives.cpp checks for the ladder
(so that the independent check and the ladder print comparable numbers), and the size parser."""
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


if __name__ == "__main__":
    sys.exit(unittest.main())
