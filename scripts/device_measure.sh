#!/usr/bin/env bash
# The one command run on the GPU machine (through the `run` device tool), from the repo root:
#   bash scripts/device_measure.sh smoke   # every group and part in a tiny mode (~1-2 min)
#   bash scripts/device_measure.sh calib   # calibration microbenchmarks, --mode full (budgeted)
#   bash scripts/device_measure.sh valid   # validation A/B/C + traces, then calibration --mode quick
# Results: $OUT/<phase>.tar.gz (ks/{raw,validation,traces}) rewritten as results arrive, and
# $OUT/<phase>.log. Environment: CALIB_BUDGET_S, VALID_BUDGET_S, QUICK_MIN_LEFT_S override budgets.
# Never changes GPU settings.
set -u -o pipefail
PHASE=${1:-smoke}
OUT=${OUT:-/tmp/ks_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export KS_COMMAND="bash scripts/device_measure.sh $PHASE"
PY=${PY:-python3}
RES=/tmp/ks
rm -rf "$RES" && mkdir -p "$RES/raw" "$RES/validation" "$RES/traces"
ARCHIVE="$OUT/$PHASE.tar.gz"
LOG="$OUT/$PHASE.log"
T0=$(date +%s)
left() { echo $(( ${PHASE_BUDGET_S:-540} - ($(date +%s) - T0) )); }

{
echo "== phase $PHASE start $(date -u +%FT%TZ) host $(hostname)"
$PY -c 'import sys, torch, triton, numpy; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, "numpy", numpy.__version__)'
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,power.limit,temperature.gpu,pstate --format=csv
case "$PHASE" in
  smoke)
    nvidia-smi -q | head -40
    $PY -m sim.calibrate.gpu.probe
    $PY -m sim.calibrate.gpu.micro --mode smoke --out "$RES/raw" --pack "$ARCHIVE" --budget-s 100
    $PY -m sim.calibrate.gpu.validate --mode smoke --out "$RES/validation" --traces-out "$RES/traces" \
        --pack "$ARCHIVE" --pack-root "$RES" --budget-s 120
    ;;
  calib)
    $PY -m sim.calibrate.gpu.micro --mode full --out "$RES/raw" --pack "$ARCHIVE" --budget-s "${CALIB_BUDGET_S:-450}"
    ;;
  valid)
    $PY -m sim.calibrate.gpu.validate --mode full --out "$RES/validation" --traces-out "$RES/traces" \
        --pack "$ARCHIVE" --pack-root "$RES" --budget-s "${VALID_BUDGET_S:-330}"
    if [ "$(left)" -gt "${QUICK_MIN_LEFT_S:-150}" ]; then
      mkdir -p "$RES/quick"
      Q0=$(date +%s)
      $PY -m sim.calibrate.gpu.micro --mode quick --out "$RES/quick" --budget-s $(( $(left) - 20 ))
      echo "== quick calibration wall: $(( $(date +%s) - Q0 )) s"
    else
      echo "== quick calibration skipped: $(left) s left"
    fi
    ;;
  *) echo "unknown phase $PHASE"; exit 2 ;;
esac
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
echo "== phase $PHASE end after $(( $(date +%s) - T0 )) s"
} 2>&1 | tee "$LOG"
# final archive (includes everything written so far)
tar -C /tmp -czf "$ARCHIVE.tmp" ks && mv "$ARCHIVE.tmp" "$ARCHIVE"
ls -la "$OUT"
