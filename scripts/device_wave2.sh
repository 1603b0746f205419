#!/usr/bin/env bash
# One device call of the second measurement wave (issues 15, 16, 18), from the repository root:
#   bash scripts/device_wave2.sh ID PARTS
# ID names this machine's results (e.g. A, B, C); PARTS is a comma list of:
#   host      sim.calibrate.gpu.host_context (steps of real models, per-op host costs, traces)
#   heldout   sim.calibrate.gpu.heldout_kernels (issue 18's held-out kernel set)
#   calib     sim.calibrate.gpu.calibrate_all (every group `kernelsim calibrate` measures, full mode)
#   comm      sim.calibrate.gpu.comm on every visible GPU (NVLink multicast off), budget COMM_BUDGET_S
# Results: $OUT/wave2_ID_<part>.tar.gz written as each part ends, and $OUT/wave2_ID.log.
# Budgets: HOST_BUDGET_S, HELDOUT_BUDGET_S. Never changes GPU settings.
set -u -o pipefail
ID=${1:?id}
PARTS=${2:-host,heldout,calib}
OUT=${OUT:-/tmp/ks_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# NVLink multicast stays off everywhere (the device machines require it)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PY:-python3}
RES=/tmp/ks_wave2_$ID
rm -rf "$RES" && mkdir -p "$RES"
LOG="$OUT/wave2_$ID.log"
T0=$(date +%s)
pack() { tar -C "$RES" -czf "$OUT/wave2_${ID}_$1.tar.gz.tmp" "$1" && mv "$OUT/wave2_${ID}_$1.tar.gz.tmp" "$OUT/wave2_${ID}_$1.tar.gz"; }
{
echo "== wave2 $ID parts $PARTS start $(date -u +%FT%TZ) host $(hostname)"
$PY -c 'import sys, torch, triton, numpy; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, "numpy", numpy.__version__, "gpus", torch.cuda.device_count())'
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.limit,temperature.gpu,pstate --format=csv
for part in ${PARTS//,/ }; do
  P0=$(date +%s)
  case "$part" in
    host)
      export KS_COMMAND="bash scripts/device_wave2.sh $ID (part host: python3 -m sim.calibrate.gpu.host_context)"
      mkdir -p "$RES/host/traces"
      $PY -m sim.calibrate.gpu.host_context --out "$RES/host" --traces-out "$RES/host/traces" --budget-s "${HOST_BUDGET_S:-170}" ;;
    heldout)
      export KS_COMMAND="bash scripts/device_wave2.sh $ID (part heldout: python3 -m sim.calibrate.gpu.heldout_kernels)"
      $PY -m sim.calibrate.gpu.heldout_kernels --out "$RES/heldout" --budget-s "${HELDOUT_BUDGET_S:-150}" ;;
    calib)
      export KS_COMMAND="bash scripts/device_wave2.sh $ID (part calib: python3 -m sim.calibrate.gpu.calibrate_all)"
      CUDA_VISIBLE_DEVICES=${CALIB_GPU:-0} $PY -m sim.calibrate.gpu.calibrate_all --out "$RES/calib/raw" ;;
    comm)
      export KS_COMMAND="bash scripts/device_wave2.sh $ID (part comm: python3 -m sim.calibrate.gpu.comm)"
      nvidia-smi topo -m || true
      $PY -m sim.calibrate.gpu.comm --out "$RES/comm" --budget-s "${COMM_BUDGET_S:-200}" ;;
    *) echo "unknown part $part" ;;
  esac
  echo "== part $part: exit $?, $(( $(date +%s) - P0 )) s"
  pack "$part"
done
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
echo "== wave2 $ID end after $(( $(date +%s) - T0 )) s"
} 2>&1 | tee "$LOG"
ls -la "$OUT"
