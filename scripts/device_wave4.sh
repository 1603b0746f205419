#!/usr/bin/env bash
# One device call of the fourth measurement wave (issues 15, 16, 18), from the repository root, on one H200:
#   bash scripts/device_wave4.sh ID PARTS
# ID names this machine's results; PARTS is a comma list of:
#   gpu    sim.calibrate.gpu.heldout_l2: held-out GEMMs / copies / sums in three L2 states, new held-out
#          shapes, calibration-split small-M kernels (GPU 0)
# Results: $OUT/wave4_ID/<part>/ and $OUT/wave4_ID.log, packed into $OUT/wave4_ID.tar.gz (the device
# returns only a shallow tree). Never changes GPU settings.
set -u -o pipefail
ID=${1:?id}
PARTS=${2:-gpu}
OUT=${OUT:-/tmp/ks_out}
W="$OUT/wave4_$ID"
mkdir -p "$W"
export PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PY:-python3}
LOG="$W/wave4_$ID.log"
T0=$(date +%s)
{
echo "== wave4 $ID parts $PARTS start $(date -u +%FT%TZ) host $(hostname)"
$PY -c 'import sys, torch, triton, numpy; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, "numpy", numpy.__version__, "gpus", torch.cuda.device_count())'
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.limit,temperature.gpu,pstate --format=csv
for part in ${PARTS//,/ }; do
  P0=$(date +%s)
  D="$W/$part"
  mkdir -p "$D"
  case "$part" in
    gpu)
      export KS_COMMAND="bash scripts/device_wave4.sh $ID (part gpu: python3 -m sim.calibrate.gpu.heldout_l2 --budget-s ${GPU_BUDGET_S:-150})"
      CUDA_VISIBLE_DEVICES=0 $PY -m sim.calibrate.gpu.heldout_l2 --out "$D" --budget-s "${GPU_BUDGET_S:-150}" ;;
    *) echo "unknown part $part" ;;
  esac
  echo "== part $part: exit $?, $(( $(date +%s) - P0 )) s"
done
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
echo "== wave4 $ID end after $(( $(date +%s) - T0 )) s"
} 2>&1 | tee "$LOG"
tar -C "$OUT" -czf "$OUT/wave4_$ID.tar.gz" "wave4_$ID" && ls -la "$OUT"
