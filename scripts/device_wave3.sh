#!/usr/bin/env bash
# One device call of the third measurement wave (issues 15, 16, 18, 20), from the repository root:
#   bash scripts/device_wave3.sh ID PARTS
# ID names this machine's results; PARTS is a comma list of:
#   comm   sim.calibrate.gpu.comm: contention grid and DDP variants on both GPUs (multicast off)
#   gpu    sim.calibrate.gpu.wave3_gpu: SDPA host time by backend, transformer step clocks,
#          held-out GEMM / copy / reduction kernels (GPU 0)
# Results: $OUT/wave3_ID_<part>/ as each part ends, and $OUT/wave3_ID.log. Never changes GPU settings.
set -u -o pipefail
ID=${1:?id}
PARTS=${2:-comm,gpu}
OUT=${OUT:-/tmp/ks_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# NVLink multicast stays off everywhere (the device machines require it)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PY:-python3}
LOG="$OUT/wave3_$ID.log"
T0=$(date +%s)
{
echo "== wave3 $ID parts $PARTS start $(date -u +%FT%TZ) host $(hostname)"
$PY -c 'import sys, torch, triton, numpy; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, "numpy", numpy.__version__, "gpus", torch.cuda.device_count())'
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.limit,temperature.gpu,pstate --format=csv
for part in ${PARTS//,/ }; do
  P0=$(date +%s)
  D="$OUT/wave3_${ID}_$part"
  mkdir -p "$D"
  case "$part" in
    comm)
      export KS_COMMAND="bash scripts/device_wave3.sh $ID (part comm: python3 -m sim.calibrate.gpu.comm --world-sizes 2 --budget-s ${COMM_BUDGET_S:-170} --stages check,contention,contention_grid,ddp_grid)"
      $PY -m sim.calibrate.gpu.comm --out "$D" --world-sizes 2 --budget-s "${COMM_BUDGET_S:-170}" \
        --stages check,contention,contention_grid,ddp_grid ;;
    gpu)
      export KS_COMMAND="bash scripts/device_wave3.sh $ID (part gpu: python3 -m sim.calibrate.gpu.wave3_gpu --budget-s ${GPU_BUDGET_S:-120})"
      CUDA_VISIBLE_DEVICES=0 $PY -m sim.calibrate.gpu.wave3_gpu --out "$D" --budget-s "${GPU_BUDGET_S:-120}" ;;
    *) echo "unknown part $part" ;;
  esac
  echo "== part $part: exit $?, $(( $(date +%s) - P0 )) s"
done
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
echo "== wave3 $ID end after $(( $(date +%s) - T0 )) s"
} 2>&1 | tee "$LOG"
ls -laR "$OUT" | head -40
