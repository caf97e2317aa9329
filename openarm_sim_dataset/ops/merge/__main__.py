"""``python -m openarm_sim_dataset.merge``: openarm_dataset's entry point, here ``dataset-merge``."""

import sys

from openarm_sim_dataset.cli.merge import main

sys.exit(main())
