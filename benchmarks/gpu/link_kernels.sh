#!/usr/bin/env bash
# Make `torchlime.kernels` importable from a clone that is on PYTHONPATH without being installed.
#
#   bash benchmarks/gpu/link_kernels.sh [REPO]      # REPO: the clone's root (default: this script's clone)
#
# An installed torchlime (a wheel, or `pip install -e`) maps `torchlime.kernels` to kernels/torchlime_kernels/
# (pyproject.toml's package-dir). A bare clone gets the git-ignored link torchlime/kernels ->
# ../kernels/torchlime_kernels instead, made only when torchlime/kernels is missing; both name the same files.
set -euo pipefail
repo=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
if [[ ! -e $repo/torchlime/kernels && ! -L $repo/torchlime/kernels ]]; then
    ln -s ../kernels/torchlime_kernels "$repo/torchlime/kernels"
    echo "linked torchlime/kernels -> ../kernels/torchlime_kernels"
fi
