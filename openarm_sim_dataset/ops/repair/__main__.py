"""``python -m openarm_sim_dataset.repair``: openarm_dataset's entry point, here ``dataset-repair``."""

import sys

from openarm_sim_dataset.cli.repair import main

sys.exit(main())
