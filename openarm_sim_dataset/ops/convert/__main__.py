"""``python -m openarm_sim_dataset.convert IN OUT [--format ...]``: openarm_dataset's entry point, here
``dataset-convert`` (its flags --fps, --smoothing-cutoff, --train-split, --success-only, --camera-format,
--state are accepted)."""

import sys

from openarm_sim_dataset.cli.convert import main

sys.exit(main())
