#!/usr/bin/env bash
# On a machine with a GPU: the whole GPU verification in one go, leaving everything in OUT_DIR
# (default artifacts/gpu-check): OUT_DIR/summary.txt (also printed) and OUT_DIR/artifacts.tar.gz (run
# folders, logs, reports, expectations written, test output).
#   scripts/gpu-check.sh [OUT_DIR] [SECTION ...]
# Sections (default: all but build and curriculum, in this order):
#   build device tests cheats bench audit gating profile sanitizer serving serve disaggregate framework
#   curriculum
#   build   configure and build here into build/device with every core (for a machine without SQLite
#           headers, carry them in .carry/include and the library in .carry/lib); the later sections
#           then use build/device's binaries; also build/slow (ch07:copy only, AISP_TEST_SLOWDOWN=ON)
#           for the gating section; AISP_CHAPTERS (optional) limits the build to those ladders
#           (cmake's -DAISP_CHAPTERS list) for a targeted run
#   cheats  aisp bench run --include-hidden -t cheats: the verdict of every cheat (docs/trust.md)
#   sanitizer  bench run and hw peaks under compute-sanitizer with an empty ceilings cache: nothing may
#           be measured or cached there (docs/ceilings.md)
#   device  nvidia-smi, aisp hw info, aisp doctor, aisp hw peaks --refresh
#   tests   CPU and GPU test binaries (the GPU tests include the cheat suite)
#   bench   aisp bench run --targets ch07 twice (the first with --update-expectations), then
#           bench check, history, report, and the repeatability of the medians
#   audit   ch07:copy with and without the audit, interleaved (A B A B): the audit's cost
#   gating  a build made with -DAISP_TEST_SLOWDOWN=ON (.carry/bin/aisp_slow) must be REGRESSED, exit 4
#   profile aisp profile --set minimal / memory on ch07:copy, and bench run --profile minimal
#   serving the serving engine's GPU tests and its logits/greedy tokens against transformers (1B, 8B x 2 layers)
#   serve   aisp serve on the Llama-3-8B shape (random weights) and aisp loadgen against it on loopback:
#           a rate sweep, concurrency 64 (the server-overhead point) and concurrency 256
#   disaggregate  (two GPUs) aisp serve --disaggregate 0,1 on the tiny model: its greedy ids against
#           aisp serve --device 0's for 32 prompts (must be equal), then a loadgen run through it
#   framework  scripts/framework/*.py: PyTorch baselines beside the ladders, written into their READMEs
#   curriculum  aisp bench run --targets $AISP_TARGETS (default ch06,ch07,ch08,ch09,ch10)
#           --update-expectations $AISP_BENCH_ARGS, then report --update-readme: the issues' "done when" runs; the
#           expectations and READMEs written come back under chapters/ in the artifacts. Before the new
#           expectations replace them, the run is checked against the committed ones (bench check: drift
#           of another machine of the same kind), and the fresh-input ratios of every variant are listed
# AISP_GPU_TEST_FILTER narrows the GPU tests (a --gtest_filter pattern; default all). AISP_SOURCE_SHA and
# AISP_SOURCE_DIRTY name the commit built here when this copy of the tree lacks its git history.
# Uses the binaries in .carry/bin when present (scripts/pack-for-device.sh), else build/default.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-artifacts/gpu-check}
shift || true
sections=${*:-device tests cheats bench audit gating profile sanitizer}
mkdir -p "$out/work"
out=$(cd "$out" && pwd)
work="$out/work"
summary="$out/summary.txt"
: >"$summary"
say() { echo "$@" | tee -a "$summary"; }
status=0
has() { [[ " $sections " == *" $1 "* ]]; }
# NCCL for ch04's vendor steps, which load libnccl.so.2 at run time: where this machine's toolkit has
# none, the one in PyTorch's wheels (nvidia/nccl/lib), unless AISP_NCCL_LIBRARY names one already.
if [ -z "${AISP_NCCL_LIBRARY:-}" ]; then
  nccl_lib=$(python3 -c 'import os, nvidia.nccl as m; print(os.path.join(list(m.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
  [ -f "$nccl_lib" ] && export AISP_NCCL_LIBRARY=$nccl_lib
fi
export NCCL_NVLS_ENABLE=0  # never NVLink multicast on these machines

if has build; then
  say "== build (build/device, $(nproc) jobs)"
  start=$(date +%s)
  extra=()
  if [ -f .carry/include/sqlite3.h ]; then
    extra+=(-DSQLite3_INCLUDE_DIR="$PWD/.carry/include" -DSQLite3_LIBRARY="$PWD/.carry/lib/libsqlite3.so.0")
    export LD_LIBRARY_PATH="$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  # cpp-httplib (the server and the load generator): its header and library, carried like SQLite's
  # (with the OpenSSL, zlib and Brotli headers it includes and the Brotli libraries it links).
  if [ -f .carry/include/httplib.h ]; then
    extra+=(-DAISP_HTTPLIB_INCLUDE_DIR="$PWD/.carry/include" -DAISP_HTTPLIB_LIBRARY="$PWD/.carry/lib/libcpp-httplib.so.0.11")
  fi
  # AISP_CHAPTERS (optional): build only these ladders (cmake's -DAISP_CHAPTERS list), for a targeted run.
  [ -n "${AISP_CHAPTERS:-}" ] && extra+=(-DAISP_CHAPTERS="$AISP_CHAPTERS")
  generator=$(command -v ninja >/dev/null && echo Ninja || echo "Unix Makefiles")
  cmake -S . -B build/device -G "$generator" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_ARCHITECTURES=90a \
    "${extra[@]}" >"$work/build.log" 2>&1 && cmake --build build/device -j "$(nproc)" >>"$work/build.log" 2>&1
  rc=$?; say "build exit $rc in $(( $(date +%s) - start )) s"
  [ $rc -eq 0 ] || { tail -40 "$work/build.log" | tee -a "$summary"; status=1; }
  if has gating && [ ! -x .carry/bin/aisp_slow ]; then
    cmake -S . -B build/slow -G "$generator" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_ARCHITECTURES=90a \
      -DAISP_TEST_SLOWDOWN=ON -DAISP_BUILD_TESTS=OFF -DAISP_CHAPTERS=ch07_memory_access/copy "${extra[@]}" \
      >"$work/build_slow.log" 2>&1 && cmake --build build/slow -j "$(nproc)" --target aisp >>"$work/build_slow.log" 2>&1
    say "slowed build (gating) exit $?"
  fi
fi

if [ -x build/device/cli/aisp ] && has build; then bin=build/device/cli; tests_dir=build/device/tests
elif [ -x .carry/bin/aisp ]; then bin=.carry/bin; tests_dir=
else bin=build/default/cli; tests_dir=build/default/tests; fi
aisp="$bin/aisp"
slow=.carry/bin/aisp_slow; [ -x "$slow" ] || slow=build/slow/cli/aisp
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

if has cheats; then
  say "== cheats: aisp bench run --include-hidden -t cheats"
  "$aisp" bench run --include-hidden --targets cheats --out "$runs" --no-history --label cheats \
    >"$work/bench_cheats.txt" 2>"$work/bench_cheats.log"; rc=$?
  say "bench run cheats exit $rc (non-zero expected: the cheats are caught)"
  python3 - "$runs" <<'PY' 2>&1 | tee -a "$summary"
import glob, json, os, sys
p = sorted(glob.glob(os.path.join(sys.argv[1], "*_cheats", "results.json")))[-1]
for t in json.load(open(p))["targets"]:
    for v in t["variants"]:
        print(f"  {v['name']:36s} {v['verdict']:11s} {v.get('reason', '')[:160]}")
PY
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
  if [ -x "$slow" ]; then
    "$slow" bench check --targets ch07:copy --out "$runs" --history "$history" --label slow \
      >"$work/check_slow.txt" 2>"$work/check_slow.log"; rc=$?
    say "bench check with the slowed build exit $rc (4 = regression)"; cat "$work/check_slow.txt" | tee -a "$summary"
    [ $rc -eq 4 ] || status=1
    "$aisp" history --targets ch07:copy --history "$history" >"$work/history_after.txt" 2>&1
  else
    say "no slowed build (.carry/bin/aisp_slow or build/slow): skipped"
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

if has sanitizer; then
  say "== sanitizer: bench run and hw peaks under compute-sanitizer, empty ceilings cache"
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  if [ -x "$sanitizer" ]; then
    abs_aisp=$(cd "$(dirname "$aisp")" && pwd)/aisp
    mkdir -p "$work/sanitizer" && pushd "$work/sanitizer" >/dev/null
    say "environment a process sees under compute-sanitizer (what core/base/instrumentation.cpp detects):"
    "$sanitizer" /usr/bin/env 2>/dev/null | grep -E '^(NV_|CUDA_INJECTION|LD_PRELOAD)' | cut -c1-160 | tee -a "$summary"
    "$sanitizer" --tool memcheck "$abs_aisp" bench run --targets ch07:copy --axis n=1Mi --no-history \
      --out runs --label sanitizer >bench.txt 2>bench.log; rc=$?
    say "bench run under compute-sanitizer exit $rc; ceilings cache files written: $(find artifacts/peaks -type f 2>/dev/null | wc -l)"
    grep -m3 -iE 'ceilings|instrument|sanitizer' bench.txt bench.log | tee -a "$summary"
    "$sanitizer" --tool memcheck "$abs_aisp" hw peaks >peaks.txt 2>&1; rc=$?
    say "hw peaks under compute-sanitizer exit $rc; cache files: $(find artifacts/peaks -type f 2>/dev/null | wc -l)"
    grep -v '^=========' peaks.txt | head -3 | tee -a "$summary"
    popd >/dev/null
  else
    say "compute-sanitizer not found: skipped"
  fi
fi

if has serving; then
  # The serving engine's correctness (issue 15): the runner's GPU tests, then the engine's logits and greedy
  # tokens against Hugging Face transformers on the same random weights, for the Llama-3.2-1B shape and
  # two layers of the Llama-3-8B shape (docs/serving-runner.md).
  models=${AISP_MODELS_DIR:-/tmp/aisp-models}
  mkdir -p "$models"
  serving_tests=${tests_dir:+$tests_dir/gpu/serving/aisp_serving_gpu_tests}
  serving_tests=${serving_tests:-.carry/bin/aisp_serving_gpu_tests}
  say "== serving: runner GPU tests"
  "$serving_tests" --gtest_color=no >"$work/serving_gpu_tests.txt" 2>&1; rc=$?
  say "serving GPU tests (no model) exit $rc"; tail -3 "$work/serving_gpu_tests.txt" | tee -a "$summary"
  [ $rc -eq 0 ] || status=1
  for spec in llama3.2-1b:0:llama1b llama3-8b:2:llama8b_2l; do
    IFS=: read -r preset layers name <<<"$spec"
    start=$(date +%s)
    layer_arg=(); [ "$layers" != 0 ] && layer_arg=(--layers "$layers")
    "$aisp" model make --preset "$preset" "${layer_arg[@]}" --out "$models/$name" --force >"$work/make_$name.txt" 2>&1
    say "model make $preset ${layer_arg[*]} exit $? in $(( $(date +%s) - start )) s"
    start=$(date +%s)
    python3 scripts/llama_reference.py --model "$models/$name" --prompts 8 --len 256 --gen 32 --seed 1 \
      --out "$models/$name.ref" >"$work/reference_$name.txt" 2>&1
    say "llama_reference.py ($name) exit $? in $(( $(date +%s) - start )) s"; tail -4 "$work/reference_$name.txt" | tee -a "$summary"
    AISP_LLAMA_DIR="$models/$name" AISP_LLAMA_REF="$models/$name.ref" "$serving_tests" --gtest_color=no \
      --gtest_filter='LlamaRunner*' >"$work/serving_vs_hf_$name.txt" 2>&1; rc=$?
    say "runner vs transformers ($name) exit $rc"
    grep -E '^\[  (FAILED|PASSED|  OK|  SKIPPED) |top-1|max \||noise|step' "$work/serving_vs_hf_$name.txt" | head -30 | tee -a "$summary"
    [ $rc -eq 0 ] || status=1
  done
fi

if has serve; then
  # `aisp serve` on the full Llama-3-8B shape and `aisp loadgen` against it on loopback: a rate sweep,
  # the concurrency-256 point of the issue, then SIGTERM (drain).
  models=${AISP_MODELS_DIR:-/tmp/aisp-models}
  mkdir -p "$models"
  if [ ! -f "$models/llama8b/config.json" ]; then
    start=$(date +%s)
    "$aisp" model make --preset llama3-8b --out "$models/llama8b" --force >"$work/make_llama8b.txt" 2>&1
    say "model make llama3-8b exit $? in $(( $(date +%s) - start )) s"
  fi
  port=18123
  "$aisp" serve --model "$models/llama8b" --port $port ${AISP_SERVE_ARGS:-} >"$work/serve.log" 2>&1 &
  server=$!
  up=0
  for _ in $(seq 1 240); do
    python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=2)" 2>/dev/null && { up=1; break; }
    kill -0 $server 2>/dev/null || break
    sleep 1
  done
  say "serve up=$up"; head -5 "$work/serve.log" | tee -a "$summary"
  if [ $up -eq 1 ]; then
    "$aisp" loadgen --url "http://127.0.0.1:$port" --input-len 512 --output-len 256 --num-prompts ${AISP_SWEEP_PROMPTS:-100} \
      --sweep-rates ${AISP_SWEEP_RATES:-2,8,32} --slo-ttft-ms 2000 --slo-tpot-ms 100 --warmup 2 \
      --out "$work/loadgen_sweep.json" >"$work/loadgen_sweep.txt" 2>&1
    say "loadgen sweep exit $?"; tail -25 "$work/loadgen_sweep.txt" | tee -a "$summary"
    # Batch 64 on the engine: the point where the issue bounds the server path's own overhead (the
    # summary's "server overhead" line: engine busy time beyond the runner's, from /metrics).
    "$aisp" loadgen --url "http://127.0.0.1:$port" --input-len 512 --output-len 256 --num-prompts ${AISP_C64_PROMPTS:-256} \
      --concurrency 64 --slo-ttft-ms 2000 --slo-tpot-ms 100 --out "$work/loadgen_c64.json" >"$work/loadgen_c64.txt" 2>&1
    say "loadgen concurrency 64 exit $?"; tail -25 "$work/loadgen_c64.txt" | tee -a "$summary"
    "$aisp" loadgen --url "http://127.0.0.1:$port" --input-len 512 --output-len 256 --num-prompts ${AISP_C256_PROMPTS:-512} \
      --concurrency 256 --slo-ttft-ms 2000 --slo-tpot-ms 100 --out "$work/loadgen_c256.json" >"$work/loadgen_c256.txt" 2>&1
    say "loadgen concurrency 256 exit $?"; tail -25 "$work/loadgen_c256.txt" | tee -a "$summary"
    python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$port/metrics').read().decode())" \
      >"$work/metrics_after.txt" 2>&1
    grep -E '^aisp_(kv_blocks|requests|running|waiting|preempt)' "$work/metrics_after.txt" | head -12 | tee -a "$summary"
  fi
  kill -TERM $server 2>/dev/null; wait $server; say "serve exit after SIGTERM: $?"
  tail -3 "$work/serve.log" | tee -a "$summary"
fi

if has disaggregate; then
  # Two GPUs: `aisp serve --disaggregate 0,1` (prefill on GPU 0, decode on GPU 1, the KV blocks moved
  # between them) must give the same greedy ids as `aisp serve --device 0` for the same prompts, then
  # carry a load. The tiny model (its weights are random, its ids checkable), loopback only.
  say "== disaggregate (aisp serve --disaggregate 0,1 against --device 0)"
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  if [ "${gpus:-0}" -lt 2 ]; then
    say "skipped: $gpus GPU(s) visible, two needed"
  else
    models=${AISP_MODELS_DIR:-/tmp/aisp-models}
    mkdir -p "$models"
    [ -f "$models/tiny/config.json" ] || "$aisp" model make --preset tiny --out "$models/tiny" --force >"$work/make_tiny.txt" 2>&1
    completions() {  # PORT OUT: 32 greedy completions of seeded random prompts, one JSON list of ids each line
      python3 - "$1" "$2" <<'PY'
import json, random, sys, urllib.request
port, out = sys.argv[1], sys.argv[2]
rng = random.Random(7)
with open(out, "w") as f:
    for i in range(32):
        prompt = [rng.randrange(3, 256) for _ in range(rng.randrange(4, 300))]
        body = json.dumps({"model": "tiny", "prompt": prompt, "max_tokens": 1 + i % 24, "ignore_eos": True}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body, {"Content-Type": "application/json"})
        f.write(json.dumps(json.load(urllib.request.urlopen(req, timeout=120))["choices"][0]["token_ids"]) + "\n")
PY
    }
    wait_up() {  # PORT PID
      for _ in $(seq 1 180); do
        python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$1/health', timeout=2)" 2>/dev/null && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 1
      done
      return 1
    }
    rc_all=0
    for mode in single disaggregated; do
      port=$([ $mode = single ] && echo 18131 || echo 18132)
      args=$([ $mode = single ] && echo "--device 0" || echo "--disaggregate 0,1")
      "$aisp" serve --model "$models/tiny" --served-model-name tiny --port $port $args >"$work/serve_$mode.log" 2>&1 &
      pid=$!
      if wait_up $port $pid; then
        completions $port "$work/completions_$mode.jsonl" 2>>"$work/serve_$mode.log"; say "$mode: completions exit $?"
        if [ $mode = disaggregated ]; then
          "$aisp" loadgen --url "http://127.0.0.1:$port" --input-len 512 --output-len 128 --num-prompts 200 \
            --concurrency 32 --slo-ttft-ms 2000 --slo-tpot-ms 100 --out "$work/loadgen_disaggregated.json" \
            >"$work/loadgen_disaggregated.txt" 2>&1
          say "disaggregated: loadgen exit $?"; tail -20 "$work/loadgen_disaggregated.txt" | tee -a "$summary"
        fi
      else
        say "$mode: the server did not come up"; rc_all=1
      fi
      head -4 "$work/serve_$mode.log" | tee -a "$summary"
      kill -TERM $pid 2>/dev/null; wait $pid; say "$mode: serve exit after SIGTERM $?"
    done
    if [ $rc_all -eq 0 ] && cmp -s "$work/completions_single.jsonl" "$work/completions_disaggregated.jsonl"; then
      say "disaggregated ids == single-GPU ids ($(grep -c '' "$work/completions_single.jsonl") completions)"
    else
      say "FAIL: disaggregated ids differ from the single-GPU ones (or a server failed)"; status=1
    fi
  fi
fi

if has framework; then
  # Framework baselines measured by scripts beside the ladders (PyTorch on this GPU): each writes its
  # README block; the READMEs come back with the curriculum's under chapters/.
  say "== framework baselines"
  python3 scripts/framework/ch16_decode_attention.py --out "$work/framework_ch16_decode.json" \
    --update-readme chapters/ch16_production_inference/paged_attention/README.md 2>&1 | tee -a "$summary"
  say "ch16 decode baseline exit ${PIPESTATUS[0]}"
  # ch04's independent check (torch.distributed over NCCL); says "needs two or more GPUs" on one.
  python3 scripts/framework/ch04_collectives.py --out "$work/framework_ch04_collectives.json" 2>&1 | tee -a "$summary"
  say "ch04 torch.distributed check exit ${PIPESTATUS[0]}"
  mkdir -p "$work/chapters"
  tar -cf - chapters/*/*/README.md | tar -C "$work/chapters" -xf -
fi

if has curriculum; then
  targets=${AISP_TARGETS:-ch06,ch07,ch08,ch09,ch10}
  say "== curriculum: $targets"
  # The committed expectations, kept aside: the run is checked against them before it replaces them.
  mkdir -p "$work/committed"
  tar -cf "$work/committed/expectations.tar" chapters/*/*/expectations_*.json 2>/dev/null
  # ch05 is placed against the disk's read rate, which bench run never measures itself (the probe writes a
  # 1 GiB file): measure it first where ch05 runs (a chapter selector, a target or every target).
  case ",$targets," in
    *,ch05,* | *,ch05:*) "$aisp" hw peaks --only disk >"$work/peaks_disk.txt" 2>&1
      say "hw peaks --only disk exit $?"; grep -i "disk" "$work/peaks_disk.txt" | head -3 | tee -a "$summary" ;;
  esac
  start=$(date +%s)
  # AISP_BENCH_ARGS (optional): more bench run options, e.g. "--min-samples 6 --warmup 1" for the
  # wall-clock serving ladders, whose launches last seconds each.
  # shellcheck disable=SC2086
  "$aisp" bench run --targets "$targets" --out "$runs" --history "$history" --label curriculum \
    --update-expectations ${AISP_BENCH_ARGS:-} >"$work/bench_curriculum.txt" 2>"$work/bench_curriculum.log"; rc=$?
  say "bench run --targets $targets --update-expectations exit $rc in $(( $(date +%s) - start )) s"
  cat "$work/bench_curriculum.txt" | tee -a "$summary"
  [ $rc -eq 0 ] || status=1
  python3 - "$(newest_run curriculum)" <<'PY' 2>&1 | tee -a "$summary"
import json, os, sys
r = json.load(open(os.path.join(sys.argv[1], "results.json")))
rows = []
for t in r["targets"]:
    for v in t["variants"]:
        f = (v.get("validation") or {}).get("fresh_inputs")
        pts = len((v.get("audit") or {}).get("points", []))
        rows.append((f["ratio"] if f else None, v["name"], t.get("axes", {}), v["verdict"], pts))
ok = [x for x in rows if x[0] is not None]
print(f"fresh-input ratios of {len(ok)} variants: max {max(x[0] for x in ok):.3f}, min {min(x[0] for x in ok):.3f}" if ok else "no fresh-input ratios")
for x in sorted(ok, key=lambda x: x[0], reverse=True)[:8]:
    print(f"  {x[0]:.3f} {x[1]} {x[2]} {x[3]} audit points {x[4]}")
print("verdicts:", {k: sum(1 for x in rows if x[3] == k) for k in sorted(set(x[3] for x in rows))})
PY
  # Drift: the committed expectations (another machine of this kind) against this run.
  mkdir -p "$work/fresh_expectations"
  tar -cf "$work/fresh_expectations/expectations.tar" chapters/*/*/expectations_*.json 2>/dev/null
  # Only the committed files: an expectations file this run wrote where none was committed must not stay,
  # or the run would be checked against itself (every variant PASS at +0.0%) instead of NOT-COMPARABLE.
  rm -f chapters/*/*/expectations_*.json
  tar -xf "$work/committed/expectations.tar"
  "$aisp" bench check --run "$(newest_run curriculum)" >"$work/check_committed.txt" 2>&1; rc=$?
  say "bench check of this run against the committed expectations exit $rc"
  grep -E 'MACHINE-DRIFT|REGRESSED|IMPROVED|summary|PASS:|targets' "$work/check_committed.txt" | head -30 | tee -a "$summary"
  rm -f chapters/*/*/expectations_*.json
  tar -xf "$work/fresh_expectations/expectations.tar"
  # The ladders' READMEs get their results tables from the expectations just written; both come back in
  # the artifacts under chapters/ (copy them over the checkout to keep them).
  "$aisp" report --update-readme --targets "$targets" >"$work/update_readme.txt" 2>&1
  say "report --update-readme exit $?"
  mkdir -p "$work/chapters"
  tar -cf - chapters/*/*/README.md chapters/*/*/expectations_*.json | tar -C "$work/chapters" -xf -
fi

# A worker the harness ended for silence left every thread's stack in its log (core/base/thread_dump.hpp)
# as binary(+offset) frames: resolve them against this build while it is here, beside the log.
python3 - "$work" <<'PY' 2>&1 | tee -a "$summary"
import glob, os, re, subprocess, sys
frame = re.compile(r"^(\S+?)\(\+(0x[0-9a-f]+)\)\s*\[0x[0-9a-f]+\]$")
for log in glob.glob(os.path.join(sys.argv[1], "runs", "*", "*.log")):
    lines = open(log, errors="replace").read().splitlines()
    if not any(l.startswith("--- thread ") for l in lines):
        continue
    out = []
    for l in lines:
        m = frame.match(l)
        if m and os.path.exists(m.group(1)):
            r = subprocess.run(["addr2line", "-f", "-C", "-i", "-e", m.group(1), m.group(2)],
                               capture_output=True, text=True)
            l += "  " + " <- ".join(x.strip() for x in r.stdout.splitlines()[:4])
        out.append(l)
    open(log + ".symbolized", "w").write("\n".join(out) + "\n")
    print(f"thread stacks symbolized: {log}.symbolized")
PY
tar -C "$work" -czf "$out/artifacts.tar.gz" . && rm -rf "$work"
say "== gpu-check exit $status"
exit $status
