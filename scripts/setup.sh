#!/usr/bin/env bash
# Installs what aisp needs to build, from the system's package manager (Debian/Ubuntu names), and nothing
# else. Idempotent: a package already present is left alone, and with everything present this script only
# checks and says so. Nothing is downloaded at build time.
set -euo pipefail

packages=(cmake ninja-build g++ nlohmann-json3-dev libcli11-dev libfmt-dev libgtest-dev libsqlite3-dev libcpp-httplib-dev)
# Optional: ccache speeds rebuilds; chromium and libpng-dev let the HTML report's browser test run (and
# check the charts' pixels) instead of skipping.
optional=(ccache chromium libpng-dev)

missing=()
for p in "${packages[@]}" "${optional[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing missing packages: ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then sudo="sudo"; else
      echo "setup: not root and no sudo; install these yourself: ${missing[*]}" >&2
      exit 1
    fi
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  # Optional packages may be absent from a mirror; the required ones may not.
  required_missing=()
  for p in "${missing[@]}"; do [[ " ${optional[*]} " == *" $p "* ]] || required_missing+=("$p"); done
  if ((${#required_missing[@]})); then $sudo apt-get install -y -qq "${required_missing[@]}"; fi
  for p in "${optional[@]}"; do
    [[ " ${missing[*]} " == *" $p "* ]] && { $sudo apt-get install -y -qq "$p" || echo "setup: optional $p not installed"; }
  done
else
  echo "setup: all packages present (${packages[*]} ${optional[*]})"
fi

# The CUDA toolkit (nvcc, cudart, CUPTI, cuBLAS) comes from NVIDIA's installer or packages, not from here.
nvcc_path=$(command -v nvcc || true)
[ -z "$nvcc_path" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc_path=/usr/local/cuda/bin/nvcc
if [ -z "$nvcc_path" ]; then
  echo "setup: no CUDA toolkit found (nvcc not on PATH nor in /usr/local/cuda/bin)." >&2
  echo "setup: install CUDA 13 (e.g. the cuda-toolkit-13-0 package from NVIDIA's repository), or build" >&2
  echo "setup: core/ and the CPU tests alone with: cmake --preset cpu-only" >&2
  exit 1
fi
echo "setup: CUDA toolkit: $("$nvcc_path" --version | tail -n 1)"

# The SASS checks (ctest *_sass_has_hgmma / *_sass_has_qgmma) disassemble the Hopper steps' objects with
# cuobjdump, which calls nvdisasm. Both ship with a full CUDA toolkit; where the toolkit lacks them (a
# compiler-only install), NVIDIA's own PyPI packages provide them, installed into .tools/ in this
# checkout (not system-wide), where CMake looks for them. Without pip the checks skip with the reason.
cuda_bin=$(dirname "$nvcc_path")
tools=.tools/cuda-binutils
pypi_bin() { compgen -G "$tools/nvidia/cu*/bin/nvdisasm" | head -n 1 | xargs -r dirname; }
if [ -x "$cuda_bin/cuobjdump" ] && [ -x "$cuda_bin/nvdisasm" ]; then
  echo "setup: cuobjdump and nvdisasm: $cuda_bin"
elif [ -z "$(pypi_bin)" ] && ! python3 -m pip --version >/dev/null 2>&1; then
  echo "setup: no cuobjdump/nvdisasm in the toolkit and no pip to fetch them; the SASS checks will be skipped" >&2
else
  if [ -z "$(pypi_bin)" ]; then
    echo "setup: installing cuobjdump and nvdisasm (PyPI: nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm) into $tools"
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --target "$tools" \
      "nvidia-cuda-cuobjdump~=13.0" "nvidia-cuda-nvdisasm~=13.0" ||
      echo "setup: could not install cuobjdump/nvdisasm from PyPI; the SASS checks will be skipped" >&2
  fi
  if [ -n "$(pypi_bin)" ]; then echo "setup: cuobjdump and nvdisasm: $(pypi_bin)"; fi
fi
