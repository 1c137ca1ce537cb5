#!/usr/bin/env bash
# One time-boxed call of the device tool (a GPU machine with $OUT): scripts/gpu-check.sh's sections within
# a budget, everything that comes back under $OUT in at most 8 files (the tool's limit).
#   scripts/device-stage.sh NAME SECTION... [tests SECTION...]
# Sections before `tests` run first (after the build, a no-op on a warm machine), then the GPU tests
# (AISP_GPU_TEST_FILTER, default the correctness gate and the peer probe) and the serving runner's GPU
# tests, then the sections after `tests`. Env: BUDGET seconds for the whole stage (default 570: the tool
# stops a command at 600), AISP_CHAPTERS (the ladders to build), AISP_TARGETS / AISP_BENCH_ARGS (the
# curriculum section's), CUDA_VISIBLE_DEVICES (e.g. 0: one GPU of a two-GPU machine, hardware key h200).
# A gpu-check cut by the budget leaves its work folder: its text files come back as NAME_*_partial.tar.gz.
# Prebuilt binaries: with .carry/bin/aisp.xz (scripts/pack-for-device.sh, run here) the stage unpacks
# aisp and the GPU test binaries and skips the build, if the unpacked aisp runs on that machine; else, or
# with AISP_BUILD_ON_DEVICE=1, it builds there (AISP_CHAPTERS narrows that build).
# Carry .carry (SQLite and cpp-httplib headers and libraries: scripts/gpu-check.sh's build section).
# Example, two GPUs: AISP_TARGETS=ch15,ch17:routing scripts/device-stage.sh a device tests curriculum
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?run through the device tool: \$OUT is where files come back}"
export NCCL_NVLS_ENABLE=0  # never NVLink multicast on these machines
export LD_LIBRARY_PATH="$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
name=$1; shift
t0=$(date +%s); budget=${BUDGET:-570}
left() { echo $(( budget - ($(date +%s) - t0) )); }
at() { echo $(( $(date +%s) - t0 )); }
log=$OUT/$name.log
{ date; nvidia-smi -L; nvidia-smi topo -m 2>&1 | head -6; } >"$log" 2>&1
pre=(); post=(); tests=0
for s in "$@"; do
  if [ "$s" = tests ]; then tests=1; elif [ $tests = 0 ]; then pre+=("$s"); else post+=("$s"); fi
done
# The CUDA libraries aisp links, wherever this machine's toolkit keeps them (the RPATH names this one's).
export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib"
build=build
gpu_tests=build/device/tests/gpu/aisp_gpu_tests
serving_tests=build/device/tests/gpu/serving/aisp_serving_gpu_tests
if [ -f .carry/bin/aisp.xz ] && [ -z "${AISP_BUILD_ON_DEVICE:-}" ]; then
  for f in .carry/bin/*.xz; do xz -dkf "$f" && chmod +x "${f%.xz}"; done
  if .carry/bin/aisp --version >>"$log" 2>&1; then
    build=  # gpu-check then uses .carry/bin
    gpu_tests=.carry/bin/aisp_gpu_tests
    serving_tests=.carry/bin/aisp_serving_gpu_tests
    echo "prebuilt binaries from .carry/bin ($(tr '\n' ' ' <.carry/bin/SOURCE_SHA 2>/dev/null))" >>"$log"
  else
    echo "the prebuilt aisp does not run here: building" >>"$log"
    rm -f .carry/bin/aisp  # so that gpu-check does not pick it up
  fi
fi
if [ -n "$build" ] || [ ${#pre[@]} -gt 0 ]; then  # gpu-check with no section would run its defaults
  timeout "$(left)" scripts/gpu-check.sh "/tmp/gc_${name}_1" $build "${pre[@]}" >>"$log" 2>&1
  echo "gpu-check 1 exit $? at $(at) s" >>"$log"
  cp "/tmp/gc_${name}_1/artifacts.tar.gz" "$OUT/${name}_1.tar.gz" 2>/dev/null
fi
if [ $tests = 1 ]; then
  timeout $(( $(left) / 2 )) "$gpu_tests" --gtest_color=no \
    --gtest_filter="${AISP_GPU_TEST_FILTER:-Correctness.*:Probes.HostLaunchAndPeerCeilings}" >"$OUT/${name}_gpu_tests.log" 2>&1
  echo "gpu tests exit $? at $(at) s" >>"$log"
  grep -E '^\[  FAILED|^\[  PASSED|^[a-z0-9]+:[a-z_0-9]+:[a-z_0-9]+: ' "$OUT/${name}_gpu_tests.log" >>"$log"
  timeout $(( $(left) * 2 / 3 )) "$serving_tests" --gtest_color=no \
    >"$OUT/${name}_serving_tests.log" 2>&1
  echo "serving gpu tests exit $? at $(at) s" >>"$log"
  grep -E '^\[  FAILED|^\[  PASSED|disaggregated \(|speculative' "$OUT/${name}_serving_tests.log" >>"$log"
fi
if [ ${#post[@]} -gt 0 ] && [ "$(left)" -gt 60 ]; then
  timeout "$(left)" scripts/gpu-check.sh "/tmp/gc_${name}_2" $build "${post[@]}" >>"$log" 2>&1
  echo "gpu-check 2 exit $? at $(at) s" >>"$log"
  cp "/tmp/gc_${name}_2/artifacts.tar.gz" "$OUT/${name}_2.tar.gz" 2>/dev/null
fi
for d in "/tmp/gc_${name}_1" "/tmp/gc_${name}_2"; do
  [ -d "$d/work" ] && tar -C "$d" -czf "$OUT/$(basename "$d")_partial.tar.gz" --exclude='*.sqlite' work 2>/dev/null
done
echo "stage $name done at $(at) s" >>"$log"
grep -v '^\[       OK' "$log" | tail -150
