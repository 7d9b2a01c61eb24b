#!/usr/bin/env bash
# bench/setup_torch.sh — installs what bench_train's PyTorch side-by-side needs: Debian's
# python3-torch, and OpenBLAS (pthread build) as the system BLAS, without which PyTorch 1.13
# falls back to the reference BLAS and runs ~9x slower (a comparison that would flatter toy).
# Not part of CI. Then: build/bench/bench_train all --threads 2
set -euo pipefail
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get install -y --no-install-recommends python3-torch libopenblas0-pthread
/usr/bin/python3 -c 'import torch; print("torch", torch.__version__)'
update-alternatives --query libblas.so.3-x86_64-linux-gnu | grep '^Value'
