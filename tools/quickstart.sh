#!/usr/bin/env bash
# The main job from a fresh clone: write a small dataset, resample it at 5 Hz.
# Usage: bash tools/quickstart.sh [OUT_DIR]   (default: out/quickstart; removed first)
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/env.sh
out="${1:-out/quickstart}"
rm -rf "$out"
.venv/bin/python -c "
import sys
from openarm_sim_dataset.synthetic import write_synthetic
write_synthetic(sys.argv[1], episodes=2, seconds=2.0, size=(160, 120))
print('wrote', sys.argv[1])
" "$out"
.venv/bin/dataset-sample "$out" --hz 5 --decode
