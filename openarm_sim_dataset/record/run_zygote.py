"""The zygote process's entry point: ``python -m openarm_sim_dataset.record.run_zygote <socket fd>``,
started by :class:`.zygote.Zygote`. A module of its own that nothing imports, so that running it as
``__main__`` leaves one copy of :mod:`.zygote` (imported with the package), not a second one."""

import sys

from .zygote import zygote_main

if __name__ == "__main__":
    zygote_main(int(sys.argv[1]))
