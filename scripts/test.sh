#!/usr/bin/env bash
# Set up, build, and run every test: the CPU tests, and the GPU tests (skipped, with the reason, where
# there is no CUDA device). Exit code non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset default >/dev/null
cmake --build --preset default
ctest --preset default "$@"
