#!/usr/bin/env bash
# Builds, then copies stripped binaries to .carry/bin (git-ignored) so that the device tool can carry them
# to a GPU machine (carry: [".carry"]). Device code keeps its -lineinfo: strip removes host symbols only.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset default >/dev/null
cmake --build --preset default
rm -rf .carry/bin && mkdir -p .carry/bin
strip -o .carry/bin/aisp build/default/cli/aisp
strip -o .carry/bin/aisp_gpu_tests build/default/tests/gpu/aisp_gpu_tests
strip -o .carry/bin/aisp_cpu_tests build/default/tests/cpu/aisp_cpu_tests
du -sh .carry
