#!/usr/bin/env bash
# Builds here, then puts stripped, xz-compressed copies of aisp and the two GPU test binaries in
# .carry/bin (git-ignored), so that a device call (carry: [".carry"]) can skip the build on the GPU
# machine (~100 s on 32 cores): scripts/device-stage.sh unpacks them there and falls back to building
# when they do not run. Stripping removes the host debug information only (345 MB -> 40 MB for aisp);
# device code keeps its -lineinfo; xz brings the three to ~19 MB. The CPU tests stay here (they run here).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset default >/dev/null
cmake --build --preset default
rm -rf .carry/bin && mkdir -p .carry/bin
for b in cli/aisp tests/gpu/aisp_gpu_tests tests/gpu/serving/aisp_serving_gpu_tests; do
  name=$(basename "$b")
  strip -o ".carry/bin/$name" "build/default/$b"
  xz -T0 -6 -f ".carry/bin/$name"  # leaves .carry/bin/$name.xz
done
git rev-parse --short=10 HEAD >.carry/bin/SOURCE_SHA
git diff --quiet HEAD && echo clean >>.carry/bin/SOURCE_SHA || echo dirty >>.carry/bin/SOURCE_SHA
du -sh .carry/bin
