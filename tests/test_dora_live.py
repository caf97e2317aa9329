"""A live ``dora run`` of the simulated data-collection dataflow (tools/dora_sim_dataflow.py): two
simulated followers on the MuJoCo OpenArm, a rendered camera, a scripted leader/UI and our recording
node; its episodes pass dataset-validate's checks of content and form and openarm_dataset reads them
as we do. With dora-openarm-dataset-recorder installed, the same dataflow runs it side by side."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

pq = pytest.importorskip("pyarrow.parquet")

pytest.importorskip("dora")
pytest.importorskip("mujoco")

sys.path.insert(0, str(Path(__file__).parents[1] / "tools"))
import dora_sim_dataflow as flow  # noqa: E402
from conftest import assert_reads_like_reference  # noqa: E402

from openarm_sim_dataset import Dataset  # noqa: E402
from openarm_sim_dataset.validate.core import validate  # noqa: E402

#: checks of timing that a loaded CI machine can fail without any fault of the recorder (samples the
#: simulated nodes were late to send; issue 18 makes them warnings for recorded data). camera_span is
#: not among them: the recorder trims frames outside the arms' span, so it must pass.
TIMING = {"timestamps", "camera_rate"}


@pytest.mark.slow  # a real dataflow: 5-6 processes, MuJoCo, ~20-40 s
@pytest.mark.realtime
def test_live_dataflow_records_episodes_that_validate_and_read_identically(tmp_path):
    if shutil.which("dora", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("no dora CLI in this environment (pip install dora-rs-cli)")
    reference = shutil.which("dora-openarm-dataset-recorder", path=str(Path(sys.executable).parent)) is not None
    p = flow.run(tmp_path, timeout=240, reference=reference, seconds=1.0, episodes=2)
    log = p.stdout + p.stderr
    (tmp_path / "run.log").write_text(log)
    # what our node said (its own lines, not dora's per-input drop warnings), for every failure below
    said = "\n".join(line for line in log.splitlines() if " recorder: " in line and "Discarding" not in line
                     and "event channel full" not in line)[-3000:]
    assert "Traceback" not in said, said
    ours = tmp_path / "data" / "ours"
    ds = Dataset(ours)
    # every episode the node began is kept; a `start` dora never delivered (seen once in 20 runs: neither
    # a drop nor a discard logged, the leader stalled ~1 s just before) is the dataflow's, not the node's
    began = re.findall(r"episode (\d+): recording", said)
    assert began and ds.episode_ids == began, said
    # it keeps up: dora dropped at most 10% as many inputs as our node stored (a node that stalled at
    # the first episode lost 520-1,034 and kept 17-169 of episode 0's 250 rows per stream; fixed: 0-28
    # on an idle 2-core machine, ~100 beside a busy loop); how many samples the simulated nodes
    # managed to send is the machine's load, not measured here
    stored = re.search(r"recorder: (\d+) samples stored", said)
    assert stored, said
    dropped = flow.drops(log).get("recorder", 0)
    assert dropped <= 0.10 * int(stored.group(1)), (dropped, stored.group(0), said)
    rows = {e: pq.ParquetFile(ours / "episodes" / e / "obs/arms/right/state.parquet").metadata.num_rows
            for e in ds.episode_ids}
    assert min(rows.values()) >= 50, (rows, said)
    report = validate(ds)
    failed = {r.check: r.detail for r in report if r.failed and r.check not in TIMING}
    assert not failed, failed
    assert assert_reads_like_reference(ours) > 1000
    # the episodes are committed with their manifest: nothing temporary left, nothing unlisted
    assert not list(ours.rglob(".tmp-*"))


@pytest.mark.slow  # a real dataflow: 4 processes, MuJoCo, ~20-30 s
@pytest.mark.realtime
def test_live_dataflow_of_one_simulation_node_keeps_each_episodes_sidecar(tmp_path):
    # sim_nodes arms owns both arms' physics: the recording node stores its sidecars, and the episodes
    # replay bit for bit and equal the physics (sim_replay, sim_resume, sim_streams_agree)
    if shutil.which("dora", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("no dora CLI in this environment (pip install dora-rs-cli)")
    # dora 1.1 can drop an input silently when the receiving node lags (its zenoh ingress channel is
    # full, before the per-input queue that logs a discard: dora-rs/dora#3397): a command to the
    # simulation node (which then says "its start never came") or a sim_file to the recorder, about one
    # run in 12 here. The recorder then saves the episode without its files and says so; only that
    # signature is run again (at most twice, each time in a fresh folder): a recorder that lost the files
    # itself would fail every run
    for attempt in range(3):
        out = tmp_path / f"run{attempt}"
        p = flow.run(out, timeout=240, seconds=1.0, episodes=2, arms=True)
        log = p.stdout + p.stderr
        if "simulation files (the rest did not come" not in log:
            break
    tmp_path = out
    said = "\n".join(line for line in log.splitlines() if " recorder: " in line and "Discarding" not in line
                     and "event channel full" not in line)[-3000:]
    assert "Traceback" not in log, log[-3000:]
    ours = tmp_path / "data" / "ours"
    ds = Dataset(ours)
    began = re.findall(r"episode (\d+): recording", said)
    assert began and ds.episode_ids == began, said
    assert all((ours / "episodes" / e / "sim" / "sidecar.npz").is_file() for e in ds.episode_ids), said
    assert ds.meta.simulation["source"] == "dataflow"
    report = validate(ds)
    failed = {r.check: r.detail for r in report if r.failed and r.check not in TIMING}
    assert not failed, failed
    passed = {r.check for r in report if r.passed}
    assert {"sim_episodes", "sim_sidecar_agrees", "sim_replay", "sim_resume", "sim_streams_agree"} <= passed, report
