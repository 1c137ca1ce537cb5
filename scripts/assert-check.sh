#!/usr/bin/env bash
# The harness's host code under libstdc++'s bounds assertions, on a GPU: the CPU suite cannot reach it
# (device/ is GPU-only), and an out-of-range read there (a warm-up of one launch read as three) once
# turned into samples of 256 launches. Runs the correctness gate and the harness tests with binaries built
# here with -D_GLIBCXX_ASSERTIONS (an assertion aborts with a message naming the container and index),
# then short `bench run`s with --warmup 1 and 2, the warm-up lengths the CPU suite cannot reach.
# Build and pack here (a RelWithDebInfo tree of its own; ~30 min on two cores):
#   cmake -S . -B /tmp/assert-build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
#     -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_CXX_FLAGS=-D_GLIBCXX_ASSERTIONS
#   cmake --build /tmp/assert-build --target aisp aisp_gpu_tests
#   mkdir -p .carry/assert; for b in cli/aisp tests/gpu/aisp_gpu_tests; do
#     strip -o .carry/assert/$(basename $b) /tmp/assert-build/$b && xz -f .carry/assert/$(basename $b); done
# Then through the device tool, carrying .carry: scripts/assert-check.sh [targets, default ch06,ch07:copy]
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?run through the device tool: \$OUT is where files come back}"
export NCCL_NVLS_ENABLE=0  # never NVLink multicast on these machines
export LD_LIBRARY_PATH="$PWD/.carry/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib"
targets=${1:-ch06,ch07:copy}
log=$OUT/assert.log
for f in .carry/assert/*.xz; do xz -dkf "$f" && chmod +x "${f%.xz}"; done
{ date; nvidia-smi -L; cat .carry/assert/SOURCE_SHA; } >"$log" 2>&1
timeout 300 .carry/assert/aisp_gpu_tests --gtest_color=no --gtest_filter='Correctness.*:Harness*' \
  >"$OUT/assert_gpu_tests.log" 2>&1
echo "gpu tests exit $?" >>"$log"
grep -E '^\[  (FAILED|PASSED)|Assertion|assert' "$OUT/assert_gpu_tests.log" | head -20 >>"$log"
for w in 1 2; do
  timeout 200 .carry/assert/aisp bench run --targets "$targets" --warmup "$w" --max-time 0.5 --no-history \
    --out /tmp/assert_runs >"$OUT/assert_bench_w$w.log" 2>&1
  echo "bench --warmup $w exit $?" >>"$log"
  grep -E 'Assertion|assert|ERROR|FAIL|INVALID|verdicts' "$OUT/assert_bench_w$w.log" | head -10 >>"$log"
done
