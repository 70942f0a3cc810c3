#!/usr/bin/env bash
# Run the CUDA tests and the GPU benchmarks in parts; every JSON and one log per part go into OUTDIR.
#
#   bash benchmarks/gpu/run.sh OUTDIR [--quick] [--short] [--tar FILE] [PART...]
#   QUICK=1 bash benchmarks/gpu/run.sh OUTDIR [PART...]     # the same as --quick
#   BUDGET=540 bash benchmarks/gpu/run.sh OUTDIR --tar FILE tests latency   # one call of at most 9 minutes
#
# Parts (no PART: all of them, in this order); each is meant to finish in under 9 minutes on an H100
# (estimated from the code and an earlier H100 run, not yet timed; minutes in brackets):
#   tests             python3 -m pytest -q -m cuda, then the kernel tests (tests/kernels/ and
#                     tests/test_backend.py: their Triton-interpreter cases, the CUDA ones ran just before) [3-5.5]
#   latency           bench_gpu_latency.py: the eager variants, accelerate="fast", the engine's own CUDA graphs
#                     (engine_graphs, beside labels: the same given SLIC labels, eager), lime and captum [4.5-7]
#   profile           bench_call_profile.py --trace: one default inception call split by torchlime's
#                     profiler ranges, device busy time, launches and host syncs by source line [0.5]
#   latency_compiled  bench_gpu_latency.py --tag compiled: the torch.compile variants (compilation is slow) [2-6]
#   throughput        bench_gpu_throughput.py [3.5-5.5]
#   segmentation      bench_segmentation.py [0.5-1]
#   audio             bench_audio_gpu.py --waveform, bench_audio_batch1.py [1.5-2]
#   text              bench_text_gpu.py, text_rationale.py [1.5-2]
#   probe             bench_probe_overhead.py: the probe eager and with accelerate="cuda_graphs", beside the
#                     forward floor of its rows [0.5-1]
#   targets           bench_boxes.py (every box of 8 images vs captum box by box), bench_generation.py
#                     (a generated continuation vs captum's LLMAttribution), bench_token_drop.py (a ViT-S/16
#                     with dropped patch tokens vs fills, its forward floor and captum, N=1000) [not yet timed on a GPU]
#   memory            bench_chunk_memory.py: peak CUDA memory per chunk size [1.5-2]
#   compat            bench_captum_switch.py (captum's Lime vs torchlime.compat.captum), bench_shap_kernel.py
#                     (shap's KernelExplainer vs torchlime.compat.shap; shap comes from the wheels) [not yet timed on a GPU]
#   designs           bench_kernel_shap_designs.py: KernelSHAP's error against exact Shapley values per design,
#                     beside captum, shap and the compat layers (torchlime's designs drawn on the device; the
#                     models are scikit-learn's, on the CPU; short: 6 rows, m = 10n) [not yet timed on a GPU]
#   amortized         bench_amortized.py: amortized heads (digits CNN, breast-cancer MLP) against LIME at N=4096
#                     and N=1000, trained and timed in one run; short mode: label N 32 and 64 only [not yet timed on a GPU]
#
# With the device tool (10 minutes a call, 30 minutes a session, at most 8 files back), four calls back
# to back (a warm machine is kept only 30 s), each `carry: ["benchmarks/gpu/wheels"]`, in this order
# of what the GPU figures need most; start the fourth only if status leaves ten minutes:
#   BUDGET=540 bash benchmarks/gpu/run.sh /tmp/gpu --tar $OUT/gpu1.tar.gz tests segmentation probe memory
#   BUDGET=540 bash benchmarks/gpu/run.sh /tmp/gpu --tar $OUT/gpu2.tar.gz latency profile
#   BUDGET=540 bash benchmarks/gpu/run.sh /tmp/gpu --tar $OUT/gpu3.tar.gz throughput audio
#   BUDGET=540 bash benchmarks/gpu/run.sh /tmp/gpu --tar $OUT/gpu4.tar.gz latency_compiled text
#
# Short mode timed on an H200 (2026-11-26, seconds per part, the latest of two runs): tests 40-47 (4 xdist
# workers), segmentation 7, latency 128, profile 26-37, throughput 79, probe 9, audio 30, text 31, memory 85,
# targets 59, compat 30; a machine's start took about 30 s. The two short calls below fit 15 minutes.
# Short mode (--short or SHORT=1), for a lease of 15 minutes in all: the same models, sizes and N, fewer
# repetitions and variants (latency: default, fast, bf16_channels_last, the two CUDA-graph variants of
# Accelerated, labels and engine_graphs, anchors once; throughput: default and bf16_channels_last, 2
# repetitions; probe: eager, graphed and the forward floor), the CUDA tests spread over 4 pytest-xdist
# workers (one file per worker) when xdist is installed, no Triton-interpreter rerun (CI runs it). Two calls back to back on one warm machine:
#   SHORT=1 BUDGET=400 bash benchmarks/gpu/run.sh /tmp/gpu --tar $OUT/gpu1.tar.gz tests segmentation latency profile throughput probe
#   SHORT=1 BUDGET=300 bash benchmarks/gpu/run.sh /tmp/gpu --tar $OUT/gpu2.tar.gz targets audio text memory compat
#
# Quick mode (--quick or QUICK=1) forwards --quick to every benchmark: tiny models, few samples, a
# smoke test whose figures are not results. It runs on a machine without a GPU too (DEVICE=cpu is
# then the default).
#
# The machine needs python3 with torch (and torchvision, triton for the GPU paths); nothing is
# installed from the network and the package is not installed: the wheels that benchmarks/gpu/prepare.sh
# collected into benchmarks/gpu/wheels/ (a git-ignored folder: bring it along) are installed offline
# into $SITE, skipping those whose distribution is already installed, and the repository goes on
# PYTHONPATH. Without a wheels folder that step is skipped. torchlime.kernels maps to kernels/torchlime_kernels/
# only in an installed package, so link_kernels.sh makes the link torchlime/kernels -> ../kernels/torchlime_kernels.
#
# Environment: DEVICE (default cuda; in quick mode cuda if available, else cpu), QUICK=1, SHORT=1,
# LATENCY_VARIANTS (the eager latency variants, space-separated, instead of the mode's list), WHEELS
# (default benchmarks/gpu/wheels), SITE (default /tmp/site), FORCE_WHEELS=1 (install every wheel,
# even over installed ones), TIMEOUT (seconds per command, default none).
#
# --tar FILE packs OUTDIR into FILE (a .tar.gz) after the environment and after every part: one file
# to bring back where only a few files can be (the device tool brings back at most 8).
# BUDGET (seconds for the whole call, default none): every command is stopped (SIGTERM, then SIGKILL
# 20 s later) when it would end later than 30 s before the budget, and parts that would start with
# less than 60 s left are not started (logged as skipped). The latency and throughput benchmarks
# answer SIGTERM by writing the repetitions they finished (`stopped_early` in their JSON, exit 124).
#
# A failing part does not stop the others; the script exits non-zero at the end if any failed or
# was skipped.
set -uo pipefail

usage() { sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
(( $# )) || usage
case $1 in -*) usage ;; esac
OUTDIR=$1
shift
QUICK=${QUICK:-0}
SHORT=${SHORT:-0}
TAR=${TAR:-}
PARTS=()
while (( $# )); do
    case $1 in
        --quick) QUICK=1 ;;
        --short) SHORT=1 ;;
        --tar) (( $# > 1 )) || { echo "run.sh: --tar needs a file name" >&2; usage; }; TAR=$2; shift ;;
        -h|--help) usage ;;
        -*) echo "run.sh: unknown option $1" >&2; usage ;;
        *) PARTS+=("$1") ;;
    esac
    shift
done
T0=$(date +%s)
ALL=(tests latency profile latency_compiled throughput segmentation audio text probe memory targets compat designs amortized)
(( ${#PARTS[@]} )) || PARTS=("${ALL[@]}")
for part in "${PARTS[@]}"; do
    [[ " ${ALL[*]} " == *" $part "* ]] || { echo "run.sh: unknown part '$part' (one of: ${ALL[*]})" >&2; exit 2; }
done

mkdir -p "$OUTDIR" || exit 2
OUTDIR=$(cd "$OUTDIR" && pwd)  # relative to where run.sh was called from
if [[ -n $TAR ]]; then
    mkdir -p "$(dirname "$TAR")" || exit 2
    TAR=$(cd "$(dirname "$TAR")" && pwd)/$(basename "$TAR")
fi
pack() {  # OUTDIR -> TAR, replaced in one step (a call stopped while packing keeps the last whole one)
    [[ -n $TAR ]] || return 0
    local name
    name=$(basename "$TAR")  # a tarball inside OUTDIR is not packed into itself
    tar czf "$TAR.part" --exclude="./$name" --exclude="./$name.part" -C "$OUTDIR" . && mv -f "$TAR.part" "$TAR"
}
left() {  # seconds of BUDGET left (a large number without a budget)
    if [[ -n ${BUDGET:-} ]]; then echo $(( BUDGET - ($(date +%s) - T0) )); else echo 1000000; fi
}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO" || exit 2
WHEELS=${WHEELS:-$REPO/benchmarks/gpu/wheels}
SITE=${SITE:-/tmp/site}
failed=()

# --- offline wheels (what prepare.sh collected) --------------------------------------------------
path_prefix=$REPO
shopt -s nullglob
wheels=("$WHEELS"/*.whl)
shopt -u nullglob
if (( ${#wheels[@]} )); then
    missing=()
    for whl in "${wheels[@]}"; do
        dist=$(basename "$whl")
        dist=${dist%%-*}
        if [[ ${FORCE_WHEELS:-0} == 1 ]] || ! python3 -c 'import importlib.metadata as m, sys; m.version(sys.argv[1])' \
                "$dist" >/dev/null 2>&1; then
            missing+=("$whl")
        else
            echo "wheels: $dist is already installed, kept"
        fi
    done
    if (( ${#missing[@]} )); then
        echo "wheels: installing ${#missing[@]} into $SITE: ${missing[*]##*/}"
        if python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
                "${missing[@]}"; then
            path_prefix=$SITE:$REPO
        else
            echo "run.sh: installing the wheels failed" >&2
            failed+=("wheels")
        fi
    fi
else
    echo "wheels: no $WHEELS/*.whl, nothing installed (run benchmarks/gpu/prepare.sh where the index is reachable)"
fi
export PYTHONPATH=$path_prefix${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1

# --- torchlime.kernels outside an installed package -----------------------------------------------
bash benchmarks/gpu/link_kernels.sh "$REPO"

# --- device ----------------------------------------------------------------------------------------
has_cuda() { python3 -c "import sys, torch; sys.exit(not torch.cuda.is_available())" >/dev/null 2>&1; }
if [[ -z ${DEVICE:-} ]]; then
    if [[ $QUICK == 1 ]] && ! has_cuda; then DEVICE=cpu; else DEVICE=cuda; fi
fi
if [[ $DEVICE == cuda* ]] && ! has_cuda; then
    echo "run.sh: torch.cuda.is_available() is False; these benchmarks need a GPU (smoke test: --quick)" >&2
    exit 2
fi
Q=()
[[ $QUICK == 1 ]] && Q=(--quick)

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  device: $DEVICE  quick: $QUICK  parts: ${PARTS[*]}"
    echo "commit: $(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo unknown)"
    python3 - <<'EOF'
import importlib
import sys

import torch

print("python", sys.version.split()[0], "| torch", torch.__version__, "|",
      torch.cuda.get_device_name() if torch.cuda.is_available() else "no cuda")
for name in ("triton", "torchvision", "kornia", "safetensors", "captum", "lime", "sklearn", "skimage", "transformers",
             "tensorboard"):
    try:
        print(name, getattr(importlib.import_module(name), "__version__", "(no __version__)"))
    except Exception as err:  # a missing package is reported, not fatal
        print(f"{name}: not importable ({type(err).__name__}: {err})")
EOF
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv
} 2>&1 | tee "$OUTDIR/environment.txt"
pack

# --- parts -----------------------------------------------------------------------------------------
EAGER=(default fast bf16 channels_last bf16_channels_last cuda_graphs bf16_channels_last_cuda_graphs labels engine_graphs)
COMPILED=(compile bf16_channels_last_compile bf16_channels_last_compile_cuda_graphs)
if [[ $DEVICE != cuda* ]]; then  # CUDA graphs need CUDA
    EAGER=(default fast bf16_channels_last labels engine_graphs)  # engine_graphs: its eager fallback
    COMPILED=(compile bf16_channels_last_compile)
fi
B=benchmarks
DEV=$(printf '%q ' --device "$DEVICE" --out "$OUTDIR" "${Q[@]}")  # quoted for eval

# Short mode's extra arguments per benchmark (later flags win over the defaults)
S_LAT=() S_PROFILE=() S_THR=() S_SEG=() S_PROBE=() S_AUDIO=() S_TEXT=() S_REPS1=() S_DESIGNS=() S_AMORT=() THROUGHPUT=() XDIST=""
if [[ $SHORT == 1 ]]; then
    S_DESIGNS=(--short)
    S_LAT=(--reps 3 --anchor-reps 1)
    S_THR=(--reps 2)
    S_PROFILE=(--reps 3)
    S_SEG=(--runs 3 --warmup 1 --skimage-runs 1)
    S_PROBE=(--reps 5)
    S_AMORT=(--label-samples 32 64)
    S_AUDIO=(--reps 3)
    S_TEXT=(--reps 2)
    S_REPS1=(--reps 1)
    if [[ $DEVICE == cuda* ]]; then
        EAGER=(default fast bf16_channels_last cuda_graphs bf16_channels_last_cuda_graphs labels engine_graphs)
        THROUGHPUT=(default bf16_channels_last)
    fi
    python3 -c "import xdist" >/dev/null 2>&1 && XDIST="-n 4 --dist loadfile"
fi
(( ${#THROUGHPUT[@]} )) || THROUGHPUT=("${EAGER[@]}")
[[ -n ${LATENCY_VARIANTS:-} ]] && read -r -a EAGER <<< "$LATENCY_VARIANTS"  # e.g. "default fast": a rerun

commands() {  # one command per line, for part $1
    case $1 in
        tests)
            echo "python3 -m pytest -q -p no:cacheprovider -m cuda tests $XDIST --junitxml=$(printf %q "$OUTDIR/tests_cuda.xml")"
            [[ $SHORT == 1 ]] || echo "python3 -m pytest -q -p no:cacheprovider -m 'not cuda' tests/kernels tests/test_backend.py" ;;
        latency) echo "python3 $B/bench_gpu_latency.py $DEV --variants ${EAGER[*]} ${S_LAT[*]}" ;;
        profile) echo "python3 $B/bench_call_profile.py $DEV --trace ${S_PROFILE[*]}" ;;
        latency_compiled) echo "python3 $B/bench_gpu_latency.py $DEV --variants ${COMPILED[*]} --no-anchors --tag compiled ${S_LAT[*]}" ;;
        throughput) echo "python3 $B/bench_gpu_throughput.py $DEV --variants ${THROUGHPUT[*]} ${S_THR[*]}" ;;
        segmentation) echo "python3 $B/bench_segmentation.py $DEV ${S_SEG[*]}" ;;
        audio)
            echo "python3 $B/bench_audio_gpu.py $DEV --waveform ${S_AUDIO[*]}"
            echo "python3 $B/bench_audio_batch1.py $DEV ${S_AUDIO[*]}" ;;
        text)
            echo "python3 $B/bench_text_gpu.py $DEV ${S_TEXT[*]}"
            echo "python3 $B/text_rationale.py $DEV" ;;
        probe) echo "python3 $B/bench_probe_overhead.py $DEV ${S_PROBE[*]}" ;;
        amortized) echo "python3 $B/bench_amortized.py $DEV ${S_AMORT[*]}" ;;
        targets)
            echo "python3 $B/bench_boxes.py $DEV ${S_REPS1[*]}"
            echo "python3 $B/bench_generation.py $DEV ${S_REPS1[*]}"
            echo "python3 $B/bench_token_drop.py $DEV ${S_REPS1[*]}" ;;
        memory) echo "python3 $B/bench_chunk_memory.py $DEV" ;;
        compat)
            echo "python3 $B/bench_captum_switch.py $DEV ${S_REPS1[*]}"
            echo "python3 $B/bench_shap_kernel.py $DEV ${S_REPS1[*]}" ;;
        designs) echo "python3 $B/bench_kernel_shap_designs.py $DEV ${S_DESIGNS[*]}" ;;
    esac
}

for part in "${PARTS[@]}"; do
    log=$OUTDIR/$part.log
    : > "$log"
    if (( $(left) < 60 )); then
        echo "=== $part: skipped, $(left) s of BUDGET=$BUDGET left" | tee -a "$log"
        failed+=("$part (skipped: no time left)")
        pack
        continue
    fi
    start=$(date +%s)
    ok=1
    while IFS= read -r cmd; do
        echo "=== $part: $cmd" | tee -a "$log"
        limit=${TIMEOUT:-}
        if [[ -n ${BUDGET:-} ]]; then
            room=$(( $(left) - 30 ))
            (( room < 1 )) && room=1
            if [[ -z $limit ]] || (( limit > room )); then limit=$room; fi
        fi
        if [[ -n $limit ]]; then
            eval "timeout -k 20 $limit $cmd" </dev/null 2>&1 | tee -a "$log"
        else
            eval "$cmd" </dev/null 2>&1 | tee -a "$log"
        fi
        status=${PIPESTATUS[0]}
        if (( status != 0 )); then
            (( status == 124 )) && echo "=== $part: stopped at its time limit ($limit s)" | tee -a "$log"
            echo "=== $part: exit status $status" | tee -a "$log"
            ok=0
        fi
    done < <(commands "$part")
    echo "=== $part: $(( $(date +%s) - start )) s, $( (( ok )) && echo ok || echo FAILED)" | tee -a "$log"
    (( ok )) || failed+=("$part")
    pack
done

if (( ${#failed[@]} )); then
    echo "run.sh: failed: ${failed[*]} (logs in $OUTDIR)" >&2
    exit 1
fi
echo "run.sh: all done; results and logs in $OUTDIR"
