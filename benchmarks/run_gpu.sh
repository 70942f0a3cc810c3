#!/usr/bin/env bash
# Run every GPU benchmark in sequence; each writes its JSON (with common.header: device,
# versions, commit, date) to benchmarks/results/.
#
#   bash benchmarks/run_gpu.sh                 # everything, on cuda
#   bash benchmarks/run_gpu.sh latency throughput   # a subset: segmentation engine latency throughput text audio
#
# A failing benchmark does not stop the others; the script exits non-zero at the end if any failed.
set -uo pipefail
cd "$(dirname "$0")"
DEVICE=${DEVICE:-cuda}

if [[ $DEVICE == cuda* ]] && ! python -c "import torch, sys; sys.exit(not torch.cuda.is_available())"; then
    echo "run_gpu.sh: torch.cuda.is_available() is False; these benchmarks need a GPU" >&2
    exit 2
fi
python -c "import torch; print('torch', torch.__version__, '|', torch.cuda.get_device_name() if torch.cuda.is_available() else 'no cuda')"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv

declare -A SCRIPTS=(
    [segmentation]="bench_segmentation.py --device $DEVICE"
    [engine]="bench_engine.py --device $DEVICE"
    [latency]="bench_gpu_latency.py --device $DEVICE"
    [throughput]="bench_gpu_throughput.py --device $DEVICE"
    [text]="bench_text_gpu.py --device $DEVICE"
    [audio]="bench_audio_gpu.py --device $DEVICE --waveform"
)
ORDER=(segmentation engine latency throughput text audio)
(( $# )) && ORDER=("$@")

failed=()
for name in "${ORDER[@]}"; do
    cmd=${SCRIPTS[$name]:-}
    if [[ -z $cmd ]]; then
        echo "run_gpu.sh: unknown benchmark '$name' (one of: ${!SCRIPTS[*]})" >&2
        failed+=("$name (unknown)")
        continue
    fi
    script=${cmd%% *}
    if [[ ! -f $script ]]; then
        echo "=== $name: $script is missing, skipped"
        failed+=("$name (missing)")
        continue
    fi
    echo "=== $name: python $cmd"
    start=$(date +%s)
    # shellcheck disable=SC2086
    python $cmd || failed+=("$name")
    echo "=== $name: $(( $(date +%s) - start )) s"
done

if (( ${#failed[@]} )); then
    echo "run_gpu.sh: failed: ${failed[*]}" >&2
    exit 1
fi
echo "run_gpu.sh: all done; results in $(pwd)/results/"
