"""The format: what an OpenArm dataset is on disk and how it is read and written.

Paths, names and versions (:mod:`.layout`), errors, atomic writes, the output lock, ``metadata.yaml`` (its
YAML codec, journal and derived index), streams, cameras, the simulation sidecar, the manifest, the
episode summary, the reader (:class:`~.dataset.Dataset`) and its resampling on the integer-ns grid, the one
commit protocol (:mod:`.writer`), and the small primitives several layers share (a sidecar window, the
frequency figures, the label palette, statistics, the Ray connection). Imports nothing above it.
"""
