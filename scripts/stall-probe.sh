#!/usr/bin/env bash
# Issue 20's colocated stall, looked at from the GPU side: runs one `aisp bench run` with a long worker
# timeout, samples every GPU's load once a second, and when a GPU has been idle for IDLE seconds during
# the timing phase (or the timing phase has lasted LONG seconds), attaches cuda-gdb to the worker and asks what each GPU is running (`info cuda
# kernels`: a kernel that never ends, or none at all while a stream waits) and where each host thread is.
# On nvidia-h200-x2 (2026-11-28) the GPU side of the attach failed ("The CUDA driver hit an internal
# error while attaching", CUresult=10) while the host threads' stacks came back (addresses: symbolize
# with addr2line against the unstripped aisp of the same commit, base = a frame's address minus its
# symbol's offset). The load samples alone showed the "stall" was launches in progress
# (chapters/ch15_disaggregated_inference/disaggregated/README.md).
#   scripts/stall-probe.sh [bench run arguments...]
# Env: IDLE (default 25 s), LONG (default 150 s), BUDGET (default 540 s). Run through the device tool ($OUT), with .carry
# carried (the prebuilt binaries of scripts/pack-for-device.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?run through the device tool: \$OUT is where files come back}"
export NCCL_NVLS_ENABLE=0  # never NVLink multicast on these machines
export LD_LIBRARY_PATH="$PWD/.carry/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib"
idle_limit=${IDLE:-25}; long_limit=${LONG:-150}; budget=${BUDGET:-540}; t0=$(date +%s)
log=$OUT/probe.log
for f in .carry/bin/*.xz; do xz -dkf "$f" && chmod +x "${f%.xz}"; done
aisp=$PWD/.carry/bin/aisp
{ date; nvidia-smi -L; "$aisp" --version; } >"$log" 2>&1

nvidia-smi --query-gpu=timestamp,index,utilization.gpu,power.draw,clocks.sm --format=csv,noheader -lms 1000 \
  >"$OUT/gpu_load.csv" 2>&1 &
smi=$!
"$aisp" bench run --out /tmp/probe_runs --no-history --timeout 480 "$@" >"$OUT/bench.log" 2>&1 &
bench=$!

declare -A last_busy
dumped=0; time_since=0
while kill -0 "$bench" 2>/dev/null; do
  sleep 1
  now=$(date +%s)
  if (( now - t0 > budget )); then echo "budget spent at $((now - t0)) s: stopping" >>"$log"; break; fi
  events=$(ls -t /tmp/probe_runs/*/events.jsonl 2>/dev/null | head -1)
  phase=$([ -n "$events" ] && grep '"type":"phase"' "$events" | tail -1 | sed -E 's/.*"phase":"([a-z]+)".*/\1/')
  while IFS=', ' read -r i u; do
    [ -z "${last_busy[$i]:-}" ] && last_busy[$i]=$now
    (( u > 0 )) && last_busy[$i]=$now
  done < <(nvidia-smi --query-gpu=index,utilization.gpu --format=csv,noheader,nounits)
  if [ "$phase" != time ]; then
    for i in "${!last_busy[@]}"; do last_busy[$i]=$now; done
    time_since=0
    continue
  fi
  (( time_since == 0 )) && time_since=$now
  why=
  for i in "${!last_busy[@]}"; do
    (( now - last_busy[$i] >= idle_limit )) && why="GPU $i idle for $((now - last_busy[$i])) s"
  done
  (( now - time_since >= long_limit )) && why="timing phase $((now - time_since)) s long"
  if [ -n "$why" ] && (( dumped == 0 )); then
    dumped=1
    worker=$(pgrep -f "aisp __worker" | head -1)
    echo "$why at $((now - t0)) s: worker $worker" >>"$log"
    nvidia-smi >>"$log" 2>&1
    cp /tmp/probe_runs/*/ch*.log "$OUT/" 2>/dev/null  # the worker's own lines so far
    timeout 200 cuda-gdb -p "$worker" -batch -ex "info cuda devices" -ex "info cuda kernels" \
      -ex "thread apply all bt 14" >"$OUT/cuda_gdb.txt" 2>&1
    echo "cuda-gdb exit $? at $(( $(date +%s) - t0 )) s" >>"$log"
    kill -9 "$worker" 2>/dev/null
  fi
done
kill "$bench" 2>/dev/null; pkill -9 -f "aisp __worker" 2>/dev/null
wait "$bench" 2>/dev/null; echo "bench exit $? at $(( $(date +%s) - t0 )) s" >>"$log"
kill "$smi" 2>/dev/null
cp /tmp/probe_runs/*/events.jsonl "$OUT/" 2>/dev/null
tar -czf "$OUT/run_logs.tar.gz" /tmp/probe_runs/*/*.log 2>/dev/null
tail -30 "$OUT/bench.log" >>"$log"
