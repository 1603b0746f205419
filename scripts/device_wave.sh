#!/usr/bin/env bash
# One device call of a measurement wave, from the repository root:
#   bash scripts/device_wave.sh WAVE ID PARTS
# WAVE numbers the wave, ID names this machine's results, PARTS is a comma list of the parts below.
# Results: $OUT/wave<WAVE>_<ID>/<part>/ and the log wave<WAVE>_<ID>.log beside them, packed into
# $OUT/wave<WAVE>_<ID>.tar.gz (the device returns only a shallow tree). Each part's budget comes from
# its environment variable (default in brackets). NVLink multicast stays off for every part (the device
# machines require it); GPU settings are only queried, never changed.
#   comm        sim.calibrate.gpu.comm: contention grid and DDP grid on both GPUs [COMM_BUDGET_S=170]
#   wave3_gpu   sim.calibrate.gpu.wave3_gpu: SDPA host time by backend, transformer step clocks,
#               held-out GEMM / copy / reduction kernels, GPU 0 [GPU_BUDGET_S=120]
#   heldout_l2  sim.calibrate.gpu.heldout_l2: held-out GEMMs / copies / sums in three L2 states, GPU 0
#               [GPU_BUDGET_S=150]
#   comm_ranks  sim.calibrate.gpu.comm stage ddp_ranks: the DDP grid's workloads with every rank's clocks
#               (rank skew, per-bucket host cost), both GPUs [COMM_BUDGET_S=110]
#   host_cold   sim.calibrate.gpu.host_context --parts steps, every config traced twice in a row, GPU 0
#               [HOST_BUDGET_S=80]
#   host_warm   the same after one throwaway profiling session (--profiler-warmup) [HOST_BUDGET_S=80]
#   calib_quick sim.calibrate.gpu.calibrate_all --quick (stops itself at 88 s), GPU 0
#   calib_full  sim.calibrate.gpu.calibrate_all, the full calibration, GPU 0 [CALIB_BUDGET_S=240]
#   compiled_train  sim.calibrate.gpu.host_context --parts compiled_train after a throwaway profiling
#               session: compiled call cost per parameter tensor, loss ops, compiled training steps of
#               calibration-split models, GPU 0 [HOST_BUDGET_S=80]
#   sm_share    sim.calibrate.gpu.comm stage sm_share: calibration-split GEMMs beside SM occupiers (spin
#               kernels, all-reduces pinned to 1/4/8/16 channels, a device copy), both GPUs [COMM_BUDGET_S=75]
#   register_small  sim.calibrate.gpu.register_small: the calibration register sweep's fused kernel on small
#               grids (1-2 blocks per SM) and with 16-warp blocks, calibration split, GPU 0 [GPU_BUDGET_S=55]
#   host_infer  sim.calibrate.gpu.host_context --parts infer_compiled: held-out compiled inference pairs and
#               gpt decode steps with a host clock around each, traced, GPU 0 [HOST_BUDGET_S=90]
#   pipe_mix    sim.calibrate.gpu.pipe_mix: held-out dropout / gelu / fused fwd+bwd kernels by BLOCK at full
#               occupancy (instruction mix), GPU 0 [PIPE_BUDGET_S=60]
#   gemm_release  sim.calibrate.gpu.gemm_release: a GEMM beside spin kernels that release their SMs part-way,
#               calibration-split shapes, GPU 0 [RELEASE_BUDGET_S=40]
#   l2_cold_rows  sim.calibrate.gpu.l2_cold: the full calibration's cold-L2 group with its few-block row sums of
#               20-44 loop iterations (part row_sum_cal), then sim.calibrate.gpu.heldout_l2 --parts sum_w3 (the
#               third wave's held-out sums in three L2 states: a check no fit reads), GPU 0
#               [L2COLD_BUDGET_S=30, SUMW3_BUDGET_S=12]
# Parts run one after the other: host costs are measured, so nothing else runs beside them.
set -u -o pipefail
WAVE=${1:?wave number}
ID=${2:?id}
PARTS=${3:?parts}
OUT=${OUT:-/tmp/ks_out}
NAME="wave${WAVE}_$ID"
W="$OUT/$NAME"
mkdir -p "$W"
export PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PY:-python3}
T0=$(date +%s)

# part NAME GPUS MODULE ARGS...: run `python3 -m MODULE --out DIR ARGS` on GPUS ("all" = every GPU),
# with the command line recorded as the results' provenance (KS_COMMAND)
part() {
  local name=$1 gpus=$2 module=$3; shift 3
  export KS_COMMAND="bash scripts/device_wave.sh $WAVE $ID $PARTS (part $name: python3 -m $module $*)"
  if [ "$gpus" = all ]; then
    $PY -m "$module" --out "$W/$name" "$@"
  else
    CUDA_VISIBLE_DEVICES=$gpus $PY -m "$module" --out "$W/$name" "$@"
  fi
}

{
echo "== $NAME parts $PARTS start $(date -u +%FT%TZ) host $(hostname)"
$PY -c 'import sys, torch, triton, numpy; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, "numpy", numpy.__version__, "gpus", torch.cuda.device_count())'
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.limit,temperature.gpu,pstate --format=csv
for p in ${PARTS//,/ }; do
  P0=$(date +%s)
  mkdir -p "$W/$p"
  case "$p" in
    comm) part comm all sim.calibrate.gpu.comm --world-sizes 2 --budget-s "${COMM_BUDGET_S:-170}" \
            --stages check,contention,contention_grid,ddp_grid ;;
    wave3_gpu) part wave3_gpu 0 sim.calibrate.gpu.wave3_gpu --budget-s "${GPU_BUDGET_S:-120}" ;;
    heldout_l2) part heldout_l2 0 sim.calibrate.gpu.heldout_l2 --budget-s "${GPU_BUDGET_S:-150}" ;;
    comm_ranks) part comm_ranks all sim.calibrate.gpu.comm --world-sizes 2 --budget-s "${COMM_BUDGET_S:-110}" \
                  --stages check,ddp_ranks ;;
    host_cold|host_warm)
      part "$p" 0 sim.calibrate.gpu.host_context --traces-out "$W/$p/traces" --parts steps --trace-repeats 2 \
        $([ "$p" = host_warm ] && echo --profiler-warmup) --budget-s "${HOST_BUDGET_S:-80}" ;;
    calib_quick) part calib_quick 0 sim.calibrate.gpu.calibrate_all --quick ;;
    calib_full) part calib_full 0 sim.calibrate.gpu.calibrate_all --budget-s "${CALIB_BUDGET_S:-240}" ;;
    compiled_train) part compiled_train 0 sim.calibrate.gpu.host_context --traces-out "$W/compiled_train/traces" \
                      --parts compiled_train --profiler-warmup --budget-s "${HOST_BUDGET_S:-80}" ;;
    sm_share) part sm_share all sim.calibrate.gpu.comm --world-sizes 2 --budget-s "${COMM_BUDGET_S:-75}" \
                --stages check,sm_share ;;
    register_small) part register_small 0 sim.calibrate.gpu.register_small --budget-s "${GPU_BUDGET_S:-55}" ;;
    host_infer) part host_infer 0 sim.calibrate.gpu.host_context --traces-out "$W/host_infer/traces" \
                  --parts infer_compiled --budget-s "${HOST_BUDGET_S:-90}" ;;
    pipe_mix) part pipe_mix 0 sim.calibrate.gpu.pipe_mix --budget-s "${PIPE_BUDGET_S:-60}" ;;
    gemm_release) part gemm_release 0 sim.calibrate.gpu.gemm_release --budget-s "${RELEASE_BUDGET_S:-40}" ;;
    l2_cold_rows) part l2_cold_rows 0 sim.calibrate.gpu.l2_cold --budget-s "${L2COLD_BUDGET_S:-30}"
                  part l2_cold_rows 0 sim.calibrate.gpu.heldout_l2 --parts sum_w3 --budget-s "${SUMW3_BUDGET_S:-12}" ;;
    *) echo "unknown part $p" ;;
  esac
  echo "== part $p: exit $?, $(( $(date +%s) - P0 )) s"
done
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
echo "== $NAME end after $(( $(date +%s) - T0 )) s"
} 2>&1 | tee "$W/$NAME.log"
tar -C "$OUT" -czf "$OUT/$NAME.tar.gz" "$NAME" && ls -la "$OUT"
