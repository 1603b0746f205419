#!/usr/bin/env bash
# The fourth measurement wave's command (issue 18), kept because committed data name it as their
# provenance: `bash scripts/device_wave4.sh ID gpu`. It now runs through the one wave script (results
# under $OUT/wave4_ID/heldout_l2/; the wave wrote $OUT/wave4_ID/gpu/ then).
set -u
ID=${1:?id}
PARTS=${2:-gpu}
exec bash "$(dirname "$0")/device_wave.sh" 4 "$ID" "${PARTS//gpu/heldout_l2}"
