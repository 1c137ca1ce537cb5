#!/usr/bin/env bash
# On a machine with a GPU: run the GPU tests and `aisp bench run --targets ch07` (twice, to show how
# repeatable the medians are), leaving everything in OUT_DIR (default: artifacts/gpu-check).
#   scripts/gpu-check.sh [OUT_DIR] [extra args for bench run]
# Uses the binaries in .carry/bin when present (scripts/pack-for-device.sh), else build/default.
# Writes OUT_DIR/summary.txt and OUT_DIR/artifacts.tar.gz (run folders, logs, test output).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-artifacts/gpu-check}
shift || true
mkdir -p "$out/work"
work=$(cd "$out/work" && pwd)
if [ -x .carry/bin/aisp ]; then
  aisp=.carry/bin/aisp gpu_tests=.carry/bin/aisp_gpu_tests cpu_tests=.carry/bin/aisp_cpu_tests
else
  aisp=build/default/cli/aisp gpu_tests=build/default/tests/gpu/aisp_gpu_tests
  cpu_tests=build/default/tests/cpu/aisp_cpu_tests
fi
summary="$out/summary.txt"
: >"$summary"
say() { echo "$@" | tee -a "$summary"; }
status=0

say "== device"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu \
  --format=csv 2>&1 | tee -a "$summary"
"$aisp" hw info >"$work/hw_info.txt" 2>&1; say "hw info exit $?"

say "== CPU tests"
"$cpu_tests" --gtest_brief=1 >"$work/cpu_tests.log" 2>&1; rc=$?; say "cpu tests exit $rc"; tail -n 3 "$work/cpu_tests.log" | tee -a "$summary"
[ $rc -eq 0 ] || status=1

say "== GPU tests"
"$gpu_tests" --gtest_color=no >"$work/gpu_tests.log" 2>&1; rc=$?; say "gpu tests exit $rc"
grep -E '^\[  (PASSED|FAILED) |^\[  FAILED  \]|^\[       OK \]|^\[  SKIPPED \]' "$work/gpu_tests.log" | tee -a "$summary"
[ $rc -eq 0 ] || status=1

for label in first second; do
  say "== aisp bench run --targets ch07 ($label) $*"
  "$aisp" bench run --targets ch07 --out "$work/runs" --label "ch07-$label" "$@" \
    >"$work/bench_$label.txt" 2>"$work/bench_$label.log"
  rc=$?; say "bench run exit $rc"; cat "$work/bench_$label.txt" | tee -a "$summary"
  [ $rc -eq 0 ] || status=1
done

say "== repeatability: median of each variant, second run over first"
python3 - "$work/runs" <<'PY' 2>&1 | tee -a "$summary"
import json, sys, glob, os
runs = sorted(glob.glob(os.path.join(sys.argv[1], "*", "results.json")))
if len(runs) < 2:
    print("fewer than two runs"); sys.exit(0)
a, b = (json.load(open(p)) for p in runs[-2:])
med = lambda r: {v["name"]: v["stats_ms"]["median"] for t in r["targets"] for v in t["variants"] if v.get("stats_ms")}
ma, mb = med(a), med(b)
for k in ma:
    if k in mb:
        print(f"{k:40s} {ma[k]:.4f} ms  {mb[k]:.4f} ms  ratio {mb[k]/ma[k]:.4f}")
PY

tar -C "$work" -czf "$out/artifacts.tar.gz" . && rm -rf "$work"
say "== gpu-check exit $status"
exit $status
