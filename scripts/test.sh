#!/usr/bin/env bash
# Set up, build, and run every test: the CPU tests, and the GPU tests (skipped, with the reason, where
# there is no CUDA device). Exit code non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset default >/dev/null
cmake --build --preset default
rc=0
ctest --preset default "$@" || rc=$?
# Where the build's time went (docs/build-budget.md): the budget CI's 2-core, 90-minute limit is spent from.
if command -v python3 >/dev/null; then python3 scripts/build-budget.py build/default --top 10 || true; fi
exit $rc
