"""Edit a dataset into a new one, its provenance kept: ``dataset-edit SRC OUT``.

The source is never modified. Operations, applied in this order to the source's episode entries:

* **select**: ``keep`` (only these ids), ``drop`` (not these), ``where`` (``KEY=VALUE`` / ``KEY!=VALUE``
  on an entry's keys: ``success``, ``valid``, ``knocked_over``, ``outcome``, ``task`` (the registry name),
  ``task_index``, ``prompt`` (its task's), ``operation_type`` (the entry's own, else the dataset's), or
  any other scalar key of an entry); all clauses must hold. Selection reads the source's labels, before
  any relabel.
* **relabel**: a task's ``prompt`` and ``description``; an episode's ``task_index``, ``success`` or
  ``outcome``. A simulated episode's labels are judged again by ``dataset-validate`` (``sim_labels``:
  its task's rule on the replayed state; ``sim_identity``: the task index its seed draws), so a relabel
  that contradicts them is refused (:class:`EditError`) unless ``force``. Every relabelled entry records
  ``relabelled: {<key>: {from, to, by: hand}}``; the validator accepts a label that differs from the
  rule's only where this mark says so, and reports it.
* **trim**: an explicit window per episode (:class:`Trim`: seconds ``1.5s`` from the episode's first
  stamp, or frame numbers ``15``: of the sidecar's frames in a simulated episode, else of its first
  camera, else rows of its first obs stream; both ends inclusive), or ``trim_idle``: the head and tail
  in which no obs joint moves more than ``threshold_rad`` from its first (last) value, cut with
  ``margin_s`` kept before the first and after the last motion (episodes with an explicit trim are
  not idle-trimmed). Streams and cameras keep the samples inside the window. A **simulated** episode is
  cut at its sidecar frames (explicit trims inward, idle trims outward) and still replays bit for bit:
  the frame's stored integration state becomes ``initial_state``, ``physics_ctrl`` keeps the commands
  from that step to the end of the episode's physics (the step its task was judged at lies there, so
  its labels stay verifiable), the per-frame arrays keep the frames inside; ``step`` and the judge's
  step count from the new first step; ``trim`` (JSON: ``first_step``, ``source_steps``, ``frames``) and
  ``source_initial_state`` record what was cut (:func:`openarm_sim_dataset.window.trim_sidecar`). The entry records ``trimmed``.
* **split**: ``{name: fraction}`` (``val=0.1``): each output ``OUT/<name>`` gets that fraction of each
  task's episodes (largest remainders, drawn with ``numpy.random.default_rng(seed)``), ``OUT/train``
  the rest.
* ids are renumbered ``0..N-1`` in source order per output (``keep_ids`` keeps them); every entry
  records ``source: {dataset, id}``.

Every output's metadata.yaml records ``edited_from``: the source's path, the SHA-256 of its
metadata.yaml and of every kept episode's ``manifest.sha256`` (null without one), the operations, the
tool; a source that was itself edited keeps its record under ``edited_from.previous``. Episodes whose
files or labels changed lose their ``valid``/``validated_at`` flags (validate the output).

Writing: each output is committed episode by episode with :mod:`openarm_sim_dataset.writer`'s protocol (an episode folder
is complete, its manifest sealed anew, before it is listed) under the output's lock; running the same
edit again on an interrupted output resumes it (an output whose ``edited_from`` differs, path aside,
is refused). Everything that can be refused (unknown ids, a trim outside its episode, an empty result,
an output inside the source, a relabel the judge contradicts) is refused before anything is written.
"""

from openarm_sim_dataset.core.window import trim_record, trim_sidecar

from .plan import EDITED_FROM, EditPlan, OutputPlan, plan_edit
from .relabel import RELABELLED, judged_labels, relabel_entries, relabel_tasks
from .request import (
    LABEL_KEYS,
    TRAIN,
    VALIDITY_KEYS,
    EditError,
    EditSpec,
    IdleTrim,
    Trim,
    parse_bool,
    parse_ids,
    parse_position,
    parse_split,
)
from .selection import Where, select
from .split import split_entries
from .trim import (
    SOURCE_INITIAL_STATE,
    TRIM_KEY,
    TRIMMED,
    Window,
    explicit_window,
    idle_window,
    trimmed_data,
    trimmed_entry,
)
from .write import EditSummary, edit

__all__ = [
    "EDITED_FROM", "LABEL_KEYS", "RELABELLED", "SOURCE_INITIAL_STATE", "TRAIN", "TRIMMED", "TRIM_KEY", "VALIDITY_KEYS",
    "EditError", "EditPlan", "EditSpec", "EditSummary", "IdleTrim", "OutputPlan", "Trim", "Where", "Window",
    "edit", "explicit_window", "idle_window", "judged_labels", "parse_bool", "parse_ids", "parse_position",
    "parse_split", "plan_edit", "relabel_entries", "relabel_tasks", "select", "split_entries", "trim_record",
    "trim_sidecar", "trimmed_data", "trimmed_entry",
]
