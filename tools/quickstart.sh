#!/usr/bin/env bash
# The main job from a fresh clone: generate 2 simulated episodes, resample them at 5 Hz, validate them,
# summarise them and write a picture of one frame (RGB, depth, labels per camera) from the stored data.
# Usage: bash tools/quickstart.sh [OUT_DIR]   (default: out/quickstart; removed first)
# Installs only what this job uses (the core and matplotlib for dataset-show: ENV_EXTRA=viz), not the
# test extras (tools/test.sh installs those).
set -euo pipefail
cd "$(dirname "$0")/.."
ENV_EXTRA=viz . tools/env.sh
out="${1:-out/quickstart}"
rm -rf "$out"
.venv/bin/dataset-generate --out "$out" --episodes 2 --seed 10 --workers 2
.venv/bin/dataset-sample "$out" --hz 5 --decode
.venv/bin/dataset-validate "$out"
.venv/bin/dataset-info "$out"
png="${out%/}-frame.png"
.venv/bin/dataset-show "$out" --episode 0 -o "$png" --plot
echo "Look at $png (one frame per camera: RGB, depth, labels) and ${png%.png}-plot.png (joints over time)."
