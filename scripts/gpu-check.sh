#!/usr/bin/env bash
# On a machine with a GPU: the whole GPU verification in one go, leaving everything in OUT_DIR
# (default artifacts/gpu-check): OUT_DIR/summary.txt (also printed) and OUT_DIR/artifacts.tar.gz (run
# folders, logs, reports, expectations written, test output).
#   scripts/gpu-check.sh [OUT_DIR] [SECTION ...]
# Sections (default: all but build and curriculum, in this order):
#   build device tests bench audit gating profile curriculum
#   build   configure and build here into build/device with every core (for a machine without SQLite
#           headers, carry them in .carry/include and the library in .carry/lib); the later sections
#           then use build/device's binaries
#   device  nvidia-smi, aisp hw info, aisp doctor, aisp hw peaks --refresh
#   tests   CPU and GPU test binaries (the GPU tests include the cheat suite)
#   bench   aisp bench run --targets ch07 twice (the first with --update-expectations), then
#           bench check, history, report, and the repeatability of the medians
#   audit   ch07:copy with and without the audit, interleaved (A B A B): the audit's cost
#   gating  a build made with -DAISP_TEST_SLOWDOWN=ON (.carry/bin/aisp_slow) must be REGRESSED, exit 4
#   profile aisp profile --set minimal / memory on ch07:copy, and bench run --profile minimal
#   curriculum  aisp bench run --targets $AISP_TARGETS (default ch06,ch07,ch08,ch09,ch10)
#           --update-expectations, then report --update-readme: the issues' "done when" runs; the
#           expectations and READMEs written come back under chapters/ in the artifacts
# AISP_GPU_TEST_FILTER narrows the GPU tests (a --gtest_filter pattern; default all). AISP_SOURCE_SHA and
# AISP_SOURCE_DIRTY name the commit built here when this copy of the tree lacks its git history.
# Uses the binaries in .carry/bin when present (scripts/pack-for-device.sh), else build/default.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-artifacts/gpu-check}
shift || true
sections=${*:-device tests bench audit gating profile}
mkdir -p "$out/work"
out=$(cd "$out" && pwd)
work="$out/work"
summary="$out/summary.txt"
: >"$summary"
say() { echo "$@" | tee -a "$summary"; }
status=0
has() { [[ " $sections " == *" $1 "* ]]; }

if has build; then
  say "== build (build/device, $(nproc) jobs)"
  start=$(date +%s)
  extra=()
  if [ -f .carry/include/sqlite3.h ]; then
    extra+=(-DSQLite3_INCLUDE_DIR="$PWD/.carry/include" -DSQLite3_LIBRARY="$PWD/.carry/lib/libsqlite3.so.0")
    export LD_LIBRARY_PATH="$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  generator=$(command -v ninja >/dev/null && echo Ninja || echo "Unix Makefiles")
  cmake -S . -B build/device -G "$generator" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_ARCHITECTURES=90a \
    "${extra[@]}" >"$work/build.log" 2>&1 && cmake --build build/device -j "$(nproc)" >>"$work/build.log" 2>&1
  rc=$?; say "build exit $rc in $(( $(date +%s) - start )) s"
  [ $rc -eq 0 ] || { tail -40 "$work/build.log" | tee -a "$summary"; status=1; }
fi

if [ -x build/device/cli/aisp ] && has build; then bin=build/device/cli; tests_dir=build/device/tests
elif [ -x .carry/bin/aisp ]; then bin=.carry/bin; tests_dir=
else bin=build/default/cli; tests_dir=build/default/tests; fi
aisp="$bin/aisp"
if [ -n "$tests_dir" ]; then
  gpu_tests=$tests_dir/gpu/aisp_gpu_tests; cpu_tests=$tests_dir/cpu/aisp_cpu_tests
else
  gpu_tests=.carry/bin/aisp_gpu_tests; cpu_tests=.carry/bin/aisp_cpu_tests
fi
runs="$work/runs"
history="$work/history.sqlite"
newest_run() { ls -1d "$runs"/*"$1"* 2>/dev/null | tail -n 1; }

if has device; then
  say "== device"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu \
    --format=csv 2>&1 | tee -a "$summary"
  "$aisp" hw info >"$work/hw_info.txt" 2>&1; say "hw info exit $?"
  "$aisp" doctor --format markdown >"$work/doctor.md" 2>&1; say "doctor exit $? ($(grep -c '' "$work/doctor.md") lines)"
  "$aisp" hw peaks --refresh >"$work/peaks.txt" 2>"$work/peaks.log"; rc=$?; say "hw peaks exit $rc"
  cat "$work/peaks.txt" | tee -a "$summary"; [ $rc -eq 0 ] || status=1
fi

if has tests; then
  say "== tests"
  "$cpu_tests" --gtest_brief=1 >"$work/cpu_tests.log" 2>&1; rc=$?; say "cpu tests exit $rc: $(grep -E '^\[  PASSED|FAILED TEST' "$work/cpu_tests.log" | tr '\n' ' ')"
  [ $rc -eq 0 ] || status=1
  if [ -n "$tests_dir" ] && command -v ctest >/dev/null; then
    # Every CTest of the build folder but the GPU binary (run below): CPU tests, CLI scripts, ch10's SASS check.
    ctest --test-dir "${tests_dir%/tests}" -E '^gpu_tests$' --output-on-failure >"$work/ctest.log" 2>&1; rc=$?
    say "ctest (scripted tests) exit $rc: $(grep -E 'tests passed|sass' "$work/ctest.log" | tr '\n' ' ')"
    [ $rc -eq 0 ] || status=1
  fi
  "$gpu_tests" --gtest_color=no --gtest_filter="${AISP_GPU_TEST_FILTER:-*}" >"$work/gpu_tests.log" 2>&1; rc=$?
  say "gpu tests (filter ${AISP_GPU_TEST_FILTER:-*}) exit $rc"
  grep -E '^\[       OK \]|^\[  FAILED  \]|^\[  SKIPPED \]|^  [a-z_0-9]+ +(PASS|FAIL|INVALID|SKIPPED|ERROR|IMPLAUSIBLE)' "$work/gpu_tests.log" | tee -a "$summary"
  [ $rc -eq 0 ] || status=1
fi

bench() {  # label, extra args...
  local label=$1; shift
  "$aisp" bench run --targets ch07 --out "$runs" --history "$history" --label "$label" "$@" \
    >"$work/bench_$label.txt" 2>"$work/bench_$label.log"
  local rc=$?; say "bench run $label $* exit $rc"; cat "$work/bench_$label.txt" >>"$summary"
  return $rc
}

if has bench; then
  say "== bench"
  bench first --update-expectations || status=1
  bench second || status=1
  cat "$work/bench_second.txt"
  "$aisp" bench check --run "$(newest_run second)" >"$work/check.txt" 2>&1; rc=$?
  say "bench check (second run against the expectations of the first) exit $rc"; cat "$work/check.txt" | tee -a "$summary"
  [ $rc -eq 0 ] || status=1
  "$aisp" history --targets ch07:copy --history "$history" >"$work/history.txt" 2>&1; say "history exit $?"
  cat "$work/history.txt" | tee -a "$summary"
  "$aisp" report "$(newest_run second)" --html "$work/report.html" --markdown "$work/report.md" >/dev/null 2>"$work/report.log"
  say "report exit $? ($(wc -c <"$work/report.html" 2>/dev/null) bytes of HTML)"
  "$aisp" bench compare "$(newest_run first)" "$(newest_run second)" >"$work/compare.txt" 2>&1; say "compare exit $?"
  cat "$work/compare.txt" >>"$summary"
  mkdir -p "$work/expectations"
  cp chapters/*/*/expectations_*.json "$work/expectations/" 2>/dev/null
fi

if has audit; then
  say "== audit cost: ch07:copy with (A) and without (B) the audit, A B A B"
  for label in audit1 noaudit1 audit2 noaudit2; do
    extra=(); [[ $label == noaudit* ]] && extra=(--no-audit)
    "$aisp" bench run --targets ch07:copy --out "$runs" --no-history --label "$label" "${extra[@]}" \
      >"$work/bench_$label.txt" 2>"$work/bench_$label.log"; say "bench run $label exit $?"
  done
  python3 - "$runs" <<'PY' 2>&1 | tee -a "$summary"
import glob, json, os, statistics, sys
def medians(tag):
    out = {}
    for p in sorted(glob.glob(os.path.join(sys.argv[1], f"*_{tag}*", "results.json"))):
        for t in json.load(open(p))["targets"]:
            for v in t["variants"]:
                if v.get("stats_ms"):
                    out.setdefault(v["name"], []).append(v["stats_ms"]["median"])
    return out
a, b = medians("audit"), medians("noaudit")
for name in a:
    if name in b:
        ma, mb = statistics.mean(a[name]), statistics.mean(b[name])
        print(f"{name:32s} with audit {ma:.4f} ms, without {mb:.4f} ms, cost {100 * (ma / mb - 1):+.2f}%")
PY
fi

if has gating; then
  say "== gating: a build with AISP_TEST_SLOWDOWN (03_vectorized copies twice) against the expectations"
  if [ -x .carry/bin/aisp_slow ]; then
    .carry/bin/aisp_slow bench check --targets ch07:copy --out "$runs" --history "$history" --label slow \
      >"$work/check_slow.txt" 2>"$work/check_slow.log"; rc=$?
    say "bench check with the slowed build exit $rc (4 = regression)"; cat "$work/check_slow.txt" | tee -a "$summary"
    [ $rc -eq 4 ] || status=1
    "$aisp" history --targets ch07:copy --history "$history" >"$work/history_after.txt" 2>&1
  else
    say "no .carry/bin/aisp_slow: skipped"
  fi
fi

if has profile; then
  say "== profile"
  for set in minimal memory; do
    start=$(date +%s)
    "$aisp" profile --targets ch07:copy --set "$set" --axis 'n=1<<28' --out "$work/profile_$set" \
      >"$work/profile_$set.txt" 2>"$work/profile_$set.log"; rc=$?
    say "profile --set $set exit $rc in $(( $(date +%s) - start )) s"; cat "$work/profile_$set.txt" | tee -a "$summary"
    [ $rc -eq 0 ] || status=1
  done
  "$aisp" bench run --targets ch07:copy --profile minimal --out "$runs" --no-history --label profiled \
    >"$work/bench_profiled.txt" 2>"$work/bench_profiled.log"; rc=$?
  say "bench run --profile minimal exit $rc"
  python3 -c "
import json,glob
p=sorted(glob.glob('$runs/*_profiled*/results.json'))[-1]
r=json.load(open(p))
for t in r['targets']:
    for v in t['variants']:
        print(v['name'], 'profile:', (v.get('profile') or {}).get('report') or (v.get('profile') or {}).get('error'))
" 2>&1 | tee -a "$summary"
fi

if has curriculum; then
  targets=${AISP_TARGETS:-ch06,ch07,ch08,ch09,ch10}
  say "== curriculum: $targets"
  start=$(date +%s)
  "$aisp" bench run --targets "$targets" --out "$runs" --history "$history" --label curriculum \
    --update-expectations >"$work/bench_curriculum.txt" 2>"$work/bench_curriculum.log"; rc=$?
  say "bench run --targets $targets --update-expectations exit $rc in $(( $(date +%s) - start )) s"
  cat "$work/bench_curriculum.txt" | tee -a "$summary"
  [ $rc -eq 0 ] || status=1
  # The ladders' READMEs get their results tables from the expectations just written; both come back in
  # the artifacts under chapters/ (copy them over the checkout to keep them).
  "$aisp" report --update-readme --targets "$targets" >"$work/update_readme.txt" 2>&1
  say "report --update-readme exit $?"
  mkdir -p "$work/chapters"
  tar -cf - chapters/*/*/README.md chapters/*/*/expectations_*.json | tar -C "$work/chapters" -xf -
fi

tar -C "$work" -czf "$out/artifacts.tar.gz" . && rm -rf "$work"
say "== gpu-check exit $status"
exit $status
