#!/usr/bin/env bash
# The third measurement wave's command (issues 15, 16, 18, 20), kept because committed data name it as
# their provenance: `bash scripts/device_wave3.sh ID PARTS`, PARTS from comm,gpu. It now runs through
# the one wave script (results under $OUT/wave3_ID/, packed into a tarball; the wave wrote
# $OUT/wave3_ID_<part>/ then).
set -u
ID=${1:?id}
PARTS=${2:-comm,gpu}
exec bash "$(dirname "$0")/device_wave.sh" 3 "$ID" "${PARTS//gpu/wave3_gpu}"
