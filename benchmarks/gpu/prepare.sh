#!/usr/bin/env bash
# Collect the wheels a GPU machine without network lacks, for benchmarks/gpu/run.sh to install offline.
#
#   bash benchmarks/gpu/prepare.sh [DEST]          # default DEST: benchmarks/gpu/wheels (git-ignored)
#
# Run it where the package index is reachable. It downloads binary wheels for CPython 3.12 on
# manylinux x86_64 (the GPU image's python3; PYTHON_VERSION=3.11 etc. for another) of
#   kornia, kornia_rs (tests/image/test_lab.py compares SLIC's colour conversion with kornia's), safetensors
#   (a dependency: torchlime.dataset imports it),
#   captum (an anchor of bench_gpu_latency.py), tqdm, shap and slicer (bench_shap_kernel.py's anchor),
# plus any names in EXTRA_PACKAGES (e.g. EXTRA_PACKAGES="scikit-image lazy_loader imageio tifffile"
# where the GPU image lacks scikit-image or its dependencies; pin with NAME==VERSION), and builds a
# wheel from lime's sdist (lime publishes no wheel; it is pure Python). Every download is --no-deps:
# the other dependencies (torch, numpy, scipy, scikit-learn, scikit-image, matplotlib, packaging) are
# expected on the GPU image. run.sh installs only the wheels whose distribution is not installed there.
#
# DEST's old wheels are removed first. Bring DEST along to the GPU machine (it is not in git), then:
#   bash benchmarks/gpu/run.sh OUTDIR [PART...]   (WHEELS=DEST when DEST is not the default)
set -euo pipefail
cd "$(dirname "$0")"
DEST=${1:-wheels}
PYTHON_VERSION=${PYTHON_VERSION:-3.12}
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
rm -f "$DEST"/*.whl  # one version of each package: two would stop the offline install

PACKAGES=(kornia kornia_rs safetensors captum tqdm shap slicer)
read -r -a EXTRA <<< "${EXTRA_PACKAGES:-}"
PLATFORMS=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
    PLATFORMS+=(--platform "$p")
done

echo "prepare.sh: wheels for CPython $PYTHON_VERSION manylinux x86_64 into $DEST"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PYTHON_VERSION" --implementation cp \
    "${PLATFORMS[@]}" -d "$DEST" "${PACKAGES[@]}" "${EXTRA[@]}"

# lime: an sdist only; build a (pure-Python) wheel from it here
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
python3 -m pip download -q --no-deps --no-binary=:all: -d "$build" lime
python3 -m pip wheel -q --no-deps --no-build-isolation -w "$DEST" "$build"/lime-*.tar.gz \
    || python3 -m pip wheel -q --no-deps -w "$DEST" "$build"/lime-*.tar.gz

echo "prepare.sh: $(find "$DEST" -maxdepth 1 -name '*.whl' | wc -l) wheels in $DEST:"
ls -1 "$DEST"
du -sh "$DEST"
