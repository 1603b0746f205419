#!/usr/bin/env bash
# Issue 16, third measurement wave: two independent full calibrations at once, one per GPU of a
# 2-GPU machine, with the harness `kernelsim calibrate` runs (sim.calibrate.gpu.calibrate_all).
#   bash scripts/device_calib_wave3.sh [BUDGET_S]
# Writes $OUT/calib/{D,E}/raw/<group>.json (D on GPU 0, E on GPU 1), $OUT/calib/{D,E}/calib.log and
# $OUT/calib/wave3.log. BUDGET_S (default 280) bounds each calibration (calibrate_all --budget-s).
# Never changes GPU settings (nvidia-smi is only queried).
set -u -o pipefail
BUDGET=${1:-280}
OUT=${OUT:-/tmp/ks_out}
PY=${PY:-python3}
export PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUT/calib/D" "$OUT/calib/E"
LOG="$OUT/calib/wave3.log"
T0=$(date +%s)
{
echo "== calib wave3 start $(date -u +%FT%TZ) host $(hostname) budget ${BUDGET}s per GPU"
$PY -c 'import sys, torch, triton; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, "gpus", torch.cuda.device_count())'
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.limit,temperature.gpu,pstate --format=csv
for pair in D:0 E:1; do
  id=${pair%%:*}; gpu=${pair##*:}
  ( export CUDA_VISIBLE_DEVICES=$gpu
    export KS_COMMAND="bash scripts/device_calib_wave3.sh $BUDGET (calibration $id on GPU $gpu, in parallel with the other: python3 -m sim.calibrate.gpu.calibrate_all --budget-s $BUDGET)"
    $PY -m sim.calibrate.gpu.calibrate_all --out "$OUT/calib/$id/raw" --budget-s "$BUDGET" > "$OUT/calib/$id/calib.log" 2>&1
    echo "== calibration $id (GPU $gpu): exit $?, $(( $(date +%s) - T0 )) s" ) &
done
wait
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
echo "== calib wave3 end after $(( $(date +%s) - T0 )) s"
} 2>&1 | tee "$LOG"
