"""Live recording of a robot into a 0.4.0 dataset: crash-safe, and never blocking the control loop.

::

    rec = Recorder("out/ds", metadata)                 # opens, or resumes, a dataset (one writer: a lock)
    ep = rec.start_episode(task_index=0)               # next free id
    ep.add_obs("arms/right", t_ns, qpos=q, qvel=dq, qtorque=tau)   # any component: "arms/left", "lifter"
    ep.add_action("arms/right", t_ns, qpos=q_cmd)
    ep.add_frame("head", t_ns, jpeg_bytes)             # or an HxWx3 uint8 array (encoded off the loop)
    ep.save(success=True)                              # or ep.discard()
    rec.close()

Units: timestamps int64 nanoseconds (Unix epoch, one clock for every stream and camera); joint
positions rad, velocities rad/s, torques N·m, the lifter's elevation as the robot reports it.

**Commit protocol.** The one of :mod:`openarm_sim_dataset.writer` (the generator's): an episode is written into
``episodes/.tmp-<id>...`` as it comes (parquet row groups of ``rows_per_group`` rows, one JPEG file or
tar member per frame), and :meth:`Episode.save` closes the files, writes the integrity manifest,
fsyncs, renames the folder to ``episodes/<id>`` and only then lists it in ``metadata.yaml``
(atomically). A process killed at any instant leaves a dataset whose listed episodes are complete;
the next :class:`Recorder` on that folder removes the partial episode, and its id is used again (it
was never listed). A discarded episode (:meth:`Episode.discard`, or a stale camera) is removed too,
but its id stays used — a gap, as the reference recorder leaves — and is recorded with its reason
under ``discarded_episodes:`` in ``metadata.yaml`` (a key readers ignore), so that a later process
does not reuse it either.

**A writer process.** ``add_*`` only copy: rows into preallocated per-stream blocks (a full block
of ``rows_per_group`` rows is copied into shared memory), frames (JPEG bytes, or an RGB array) into
a shared-memory ring. A frame's 40-byte descriptor in the shared memory tells the recorder's writer
process (:mod:`.writer_process`) where it is (on x86 nothing else: no system call in ``add_frame``;
elsewhere their count goes in a pipe message), a message of a few dozen bytes does for a block of
rows. That process does every disk write and the JPEG encoding of array frames, so the control loop
shares neither the GIL nor the allocator with the disk. What waits for the writer is bounded in
bytes (``max_pending_bytes``; the ring holds twice that) and in messages (the pipe's capacity,
``pipe_bytes``, and as many bytes of frame descriptors): a frame that does not fit is **dropped**,
and a block of state rows is dropped only above twice the bound (rows are ~100 kB/s, frames MB/s). Every drop is
counted per stream (:attr:`Episode.dropped`, ``dropped:`` in the episode's metadata entry) and
warned about once per episode; ``add_*`` return False for a sample not stored.

**Stopping before saving.** :meth:`Episode.stop` ends an episode's samples without committing it:
the next episode may start at once while the stopped one still takes its files (:meth:`Episode.add_file`,
e.g. a simulation node's, which arrive after the command that ended the episode); it is saved or
discarded later, and its id stays taken meanwhile.

**A killed writer** (SIGKILL, out of memory) never takes the caller down: the open episode is
discarded (its id recorded under ``discarded_episodes:`` with the reason), the next ``add_*`` call
returns False with a warning naming the exit status, :meth:`Episode.save` raises
:class:`EpisodeDiscarded` with it, and the next :meth:`Recorder.start_episode` starts a new writer.
A killed *caller* makes the writer exit at once without listing anything (the writer holds the
dataset's lock until then; a recorder opened meanwhile waits for it, at most 5 s).

**Stale cameras.** A declared camera that sends no frame, or only byte-identical frames, for longer
than ``stale_after_s`` (default 1 s, measured on the samples' own timestamps) discards the episode;
:attr:`Episode.reason` says which camera and for how long, and :meth:`Episode.save` raises
:class:`EpisodeDiscarded` with it.

**Frames outside the arms' span.** At save, the writer removes the frames stamped before the latest
first state sample or after the earliest last one, beyond one state period (``layout.camera_window``,
the validator's ``camera_span`` rule): a camera's last frames arrive after the arms' last samples
when an episode ends on a command. The entry's ``trimmed_frames:`` counts them per camera, and
:attr:`EpisodeResult.frames` counts the frames stored.

**Frequencies.** Each saved entry records ``measured_hz`` (1 / median interval of each stream and
camera, same shape as ``frequencies:``); the dataset's ``frequencies:`` are the median over the
listed episodes, rounded to 0.1 Hz. Declared streams never recorded keep the value the metadata
gave.

**Modules.** :mod:`.recorder` (:class:`Recorder`), :mod:`.episode` (:class:`Episode`, the control
loop's side), :mod:`.open_dataset` (lock, metadata checks), :mod:`.ring` (the shared memory),
:mod:`.messages` (pipe framing), :mod:`.writer_process` (the disk side), :mod:`.zygote` (forks the
writer processes), :mod:`.frequencies` (measured rates), :mod:`.errors`.
"""

from .episode import Episode, EpisodeResult
from .errors import EpisodeDiscarded, RecorderLockError, RecordError
from .open_dataset import ORPHAN_WAIT_S
from .recorder import F_SETPIPE_SZ, Recorder
from .ring import DESCRIPTOR_WORDS
from .writer_process import DISCARDED_KEY

__all__ = [
    "DESCRIPTOR_WORDS",
    "DISCARDED_KEY",
    "F_SETPIPE_SZ",
    "ORPHAN_WAIT_S",
    "Episode",
    "EpisodeDiscarded",
    "EpisodeResult",
    "RecordError",
    "Recorder",
    "RecorderLockError",
]
