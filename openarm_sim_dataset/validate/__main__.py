"""``python -m openarm_sim_dataset.validate DIR``: openarm_dataset's entry point, here ``dataset-validate``
(its rows on stdout, openarm_dataset's ``<file>: includes null values`` lines on stderr, exit 1 when invalid)."""

import sys

from openarm_sim_dataset.cli.validate import main

sys.exit(main())
