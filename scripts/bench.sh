#!/usr/bin/env bash
# The main job on a fresh machine: set up, build, and run `aisp bench run` on the default suite.
# Extra arguments go to `aisp bench run` (e.g. --targets ch07:copy). Without a GPU it ends with exit
# code 3 and one line ("aisp: no CUDA device: ..."), after building.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset default >/dev/null
cmake --build --preset default
exec build/default/cli/aisp bench run "$@"
