#!/usr/bin/env bash
# Issue 15, profiler warm-up and repeated traces (wave 5, one H200, GPU 0), from the repository root:
#   OUT=$OUT HOST_BUDGET_S=85 bash scripts/device_host_warmup.sh
# Two processes, one after the other, each measuring the host_context steps (no per-op part) and
# tracing every config twice in a row (--trace-repeats 2):
#   cold  as the committed host_context runs were recorded (the first config is the process's first
#         profiling session)
#   warm  the same after one throwaway profiling session (--profiler-warmup)
# Results: $OUT/host3/wave5_host3.tar.gz (cold/ and warm/: host_context.json + traces/) and the log
# $OUT/host3/wave5_host3.log. Writes nothing else under $OUT; GPU settings are only queried.
set -u -o pipefail
OUT=${OUT:-/tmp/ks_out}
B=${HOST_BUDGET_S:-85}
PY=${PY:-python3}
DEST="$OUT/host3"
W=$(mktemp -d)
mkdir -p "$DEST" "$W/wave5_host3"
export PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
T0=$(date +%s)
{
echo "== wave5 host3 start $(date -u +%FT%TZ) host $(hostname) budget ${B} s per run"
$PY -c 'import sys, torch, triton; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, "gpus", torch.cuda.device_count())'
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.limit,temperature.gpu,pstate --format=csv
for run in cold warm; do
  P0=$(date +%s)
  D="$W/wave5_host3/$run"
  extra=""
  [ "$run" = warm ] && extra="--profiler-warmup"
  export KS_COMMAND="bash scripts/device_host_warmup.sh (run $run: python3 -m sim.calibrate.gpu.host_context --parts steps --trace-repeats 2 $extra --budget-s $B)"
  CUDA_VISIBLE_DEVICES=0 $PY -m sim.calibrate.gpu.host_context --out "$D" --traces-out "$D/traces" \
    --parts steps --trace-repeats 2 $extra --budget-s "$B"
  echo "== run $run: exit $?, $(( $(date +%s) - P0 )) s"
done
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
echo "== wave5 host3 end after $(( $(date +%s) - T0 )) s"
} 2>&1 | tee "$W/wave5_host3/wave5_host3.log"
cp "$W/wave5_host3/wave5_host3.log" "$DEST/"
tar -C "$W" -czf "$DEST/wave5_host3.tar.gz" wave5_host3 && ls -la "$DEST"
rm -rf "$W"
