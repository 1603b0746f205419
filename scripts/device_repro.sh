#!/usr/bin/env bash
# The reproducibility run (python -m sim.calibrate.repro) of every committed full calibration on the device
# machine's CPU cores (no GPU is used), from the repository root:
#   OUT=$OUT KS_SHA=<main's sha> [REPRO_BUDGET_S=480] [REPRO_JOBS=N] [REPRO_FIRST=N] bash scripts/device_repro.sh [REPRO ARGS...]
# The device has Python 3.12 with numpy, scipy, pyyaml, matplotlib and rich but not simpy or pydantic: their
# wheels travel in .whl/ (git-ignored; named in the call's carry) and are installed into /tmp/site. The repository
# itself goes on PYTHONPATH (nothing is built). Calibrations: REPRO_CALIBS ("NAME=RAW_DIR ..."; default: every
# committed full calibration below, and machine P's folder when it is there). Extra arguments go to repro as they
# are (e.g. --reuse FILE to skip calibrations already done).
# Every calibration and the reference validation is written to $OUT's partial.tar.gz (repro --partial-dir) as
# soon as it is finished, so a run stopped by its budget (timeout sends SIGTERM: repro stops its workers cleanly)
# keeps what it finished; `python -m sim.calibrate.repro ... --reuse` of those files completes it elsewhere.
# Results in $OUT (flat: the device returns at most 8 files): repro.json (when the run finished), repro.log,
# note.txt (the document's note), partial.tar.gz, profiles.tar.gz (the fitted profiles), validations.tar.gz (their
# validate JSONs), provenance.txt.
set -u -o pipefail
OUT=${OUT:-/tmp/ks_out}
BUDGET=${REPRO_BUDGET_S:-480}
PY=${PY:-python3}
ROOT=$PWD
mkdir -p "$OUT"
CORES=$(getconf _NPROCESSORS_ONLN)  # not nproc: it prints OMP_NUM_THREADS once that is set (it printed 1 on the device)
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
T0=$(date +%s)

if [ "${REPRO_WHEELS:-1}" = 1 ] && compgen -G ".whl/*.whl" >/dev/null; then  # REPRO_WHEELS=0: use the installed ones
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "device_repro: wheel install failed" >&2; exit 1; }
  export PYTHONPATH="/tmp/site:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
fi

H=calibration/h200
# newest first: with more calibrations than cores the pool starts them in this order (after the reference
# validation), so a run stopped by its budget has finished the newest; the committed document lists them in
# the order its merge command gives (python -m sim.calibrate.repro ... --reuse partial/*.json)
DEFAULT=""
# every wave folder with a raw calibration (waveW_NAME/raw: K, calib7, L, M, N, O and any later one), newest first
for w in $(ls -d $H/wave*_*/raw 2>/dev/null | sed -E 's|^.*/wave([0-9]+)_([^/]+)/raw$|\1 \2|' | sort -k1,1nr -k2,2 \
           | awk '{print "wave" $1 "_" $2}'); do
  DEFAULT+="${w#*_}=$H/$w/raw "
done
# then the full calibrations of waves 2-8 (calibration/h200/runs/NAME/raw), newest first
for n in Y X W V T S Q_full E D C B A; do DEFAULT+="$n=$H/runs/$n/raw "; done
CALIBS=${REPRO_CALIBS:-$DEFAULT}
DIRS=() NAMES=""
for c in $CALIBS; do
  name=${c%%=*} dir=${c#*=}
  [ -d "$dir" ] || { echo "device_repro: $dir (calibration $name): no such folder" >&2; exit 2; }
  DIRS+=("$dir") NAMES+="${NAMES:+,}$name"
done
# one process per calibration and one for the reference validation, all started at once (the least wall time);
# those past the first CORES - 1 calibrations run niced (repro --first), so that with more processes than cores
# the first ones finish first: what a run stopped by its budget keeps
JOBS=${REPRO_JOBS:-$(( ${#DIRS[@]} + 1 ))}
FIRST=${REPRO_FIRST:-$(( CORES - 1 ))}

VERSIONS=$($PY -c 'import sys, numpy, scipy, yaml, pydantic, simpy
print(f"Python {sys.version.split()[0]}, numpy {numpy.__version__}, scipy {scipy.__version__}, pyyaml {yaml.__version__}, "
      f"pydantic {pydantic.VERSION}, simpy {simpy.__version__}")') || { echo "device_repro: imports failed" >&2; exit 1; }
CPU=$(grep -m1 "model name" /proc/cpuinfo | sed 's/.*: //')
NOTE="${#DIRS[@]} full calibrations (${NAMES//,/, }), each fitted from its own raw folder over h200-sxm and validated \
on the shipped validation data, with the code of main ${KS_SHA:-unknown} on $CORES CPU cores of a lent device \
machine (${REPRO_MACHINE:-nvidia-h200}, $CPU; no GPU used; $VERSIONS), $(date -u +%F), \
\`bash scripts/device_repro.sh\` (--jobs $JOBS --first $FIRST)."
{
  echo "host $(uname -n), $CORES cores, $CPU, $(awk "/MemTotal/ {printf \"%.0f GiB\", \$2/1048576}" /proc/meminfo)"
  echo "$VERSIONS"
  echo "main ${KS_SHA:-unknown}; start $(date -u +%FT%TZ); budget ${BUDGET} s; jobs $JOBS, first $FIRST"
  echo "calibrations: $CALIBS"
} > "$OUT/provenance.txt"
echo "$NOTE" > "$OUT/note.txt"
cat "$OUT/provenance.txt"

PART=/tmp/repro_partial PROF=/tmp/repro_profiles
rm -rf "$PART" "$PROF"
timeout -s TERM "$BUDGET" $PY -m sim.calibrate.repro "${DIRS[@]}" --names "$NAMES" --jobs "$JOBS" --first "$FIRST" \
  --json "$OUT/repro.json" --partial-dir "$PART" --profiles-out "$PROF" --note "$NOTE" "$@" > "$OUT/repro.log" 2>&1
RC=$?
# 0: every limit holds, 3: some do not (the expected outcome), 124/143: stopped by the budget
echo "repro exit $RC after $(( $(date +%s) - T0 )) s; end $(date -u +%FT%TZ)" | tee -a "$OUT/provenance.txt"
tail -n 3 "$OUT/repro.log"
[ -d "$PART" ] && tar czf "$OUT/partial.tar.gz" -C /tmp repro_partial && ls "$PART" | tr '\n' ' ' && echo
[ -d "$PROF" ] && (cd /tmp && tar czf "$OUT/profiles.tar.gz" repro_profiles/*.yaml \
  && tar czf "$OUT/validations.tar.gz" repro_profiles/*.validation.json)
ls -la "$OUT"
[ -f "$OUT/repro.json" ]
