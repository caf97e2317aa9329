"""dataset-view on LeRobot datasets: the same page and JSON API as on an OpenArm layout, read through the
reader (``ds.lerobot``): the episode list (durations from the rows' stamps, cameras as ``video``/``image``),
an episode's streams for the plots, frames decoded from the MP4 (or the PNG in the frame table) served as
the camera's own JPEG (``cam.read_bytes``), a planted shifted timestamp's finding at its episode and time,
a video outside the dataset refused, nothing written into the dataset; (slow set) the page in a real
headless Chromium showing the decoded frame at the time asked.

Datasets: our export (``write_synthetic`` then ``Dataset.write(format="lerobot_v3.0", fps=15)``) and, when
present, two datasets LeRobot wrote (tests/fixture/lerobot: the AV1 bimanual OpenArm, another robot whose
camera is PNG in the parquet)."""

from __future__ import annotations

import io
import json
import shutil
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import OWN_FIXTURES, tree_hashes
from PIL import Image
from viewer_http import get, get_json

from openarm_sim_dataset import Dataset
from openarm_sim_dataset.synthetic import write_synthetic

pytest.importorskip("av")

pytestmark = pytest.mark.xdist_group("test_lerobot_view")  # one worker: the datasets and one browser, built once

FPS = 15
LEROBOT_FIXTURES = OWN_FIXTURES / "lerobot"
#: our export, then what LeRobot wrote: AV1 video cameras, an image camera (PNG in the parquet) of another
#: robot, v2.1 (one data file and MP4 per episode)
#: our export and LeRobot's AV1 in the default run; LeRobot's PNG and v2.1 datasets in the slow set
DATASETS = ["export", "v30_bi_openarm_av1", pytest.param("v30_other_robot", marks=pytest.mark.slow),
            pytest.param("v21_bi_openarm", marks=pytest.mark.slow)]
#: frame 17 of episode 1 of the export stamped 12 ms late (tests/test_validate_lerobot.py's plant)
SHIFT_ROW, SHIFT_S = 17, 0.012


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("lrview")
    src = write_synthetic(base / "src", episodes=3, seconds=2.0, camera_hz=30, size=(64, 48))
    return Dataset(src).write(base / "lerobot_v3.0", format="lerobot_v3.0", fps=FPS)


def _dataset(name: str, export: Path) -> Path:
    if name == "export":
        return export
    path = LEROBOT_FIXTURES / name
    if not (path / "meta/info.json").is_file():
        pytest.skip(f"{path} is absent (tests/fixture/lerobot: the datasets LeRobot wrote)")
    return path


@pytest.fixture(scope="module", params=DATASETS)
def served(request, export):
    """(server, dataset path, its files' hashes before the viewer opened it) of a LeRobot dataset."""
    from openarm_sim_dataset.view import open_viewer

    path = _dataset(request.param, export)
    before = tree_hashes(path)
    server = open_viewer(path, port=0)
    server.serve_in_thread()
    try:
        yield server, path, before
    finally:
        server.shutdown()
        server.server_close()


def shift_timestamp(root: Path, episode: int = 1, row: int = SHIFT_ROW, by_s: float = SHIFT_S) -> None:
    """Stamp one row of an episode ``by_s`` late in its v3.0 data file (nothing else changes)."""
    path = Dataset(root).lerobot.data_path(str(episode))
    table = pq.read_table(path)
    ts = table.column("timestamp").to_numpy().copy()
    rows = np.flatnonzero(table.column("episode_index").to_numpy() == episode)
    ts[rows[row]] += np.float32(by_s)
    i = table.column_names.index("timestamp")
    field = table.schema.field(i)
    pq.write_table(table.set_column(i, field, pa.array(ts, type=field.type)), path)


# ------------------------------------------------------------------ the JSON API
def test_the_dataset_and_its_episodes_are_listed(served):
    server, path, _ = served
    ds = Dataset(path)
    doc = get_json(server, "/api/dataset")
    assert doc["version"] == ds.version and doc["version"].startswith("lerobot_v")
    assert doc["metadata_file"] == "meta/info.json" and doc["lerobot"]["fps"] == ds.lerobot.fps
    assert doc["episodes"] == ds.num_episodes and doc["cameras"] == ds.camera_names and ds.camera_names
    rows = get_json(server, "/api/episodes")["episodes"]
    assert [r["id"] for r in rows] == ds.episode_ids
    for r, ep in zip(rows, ds.episodes):
        ts = ds.lerobot.row_timestamps(r["id"])
        assert r["stream_error"] is None and r["duration_s"] == round((ts.max() - ts.min()) / 1e9, 3) > 0
        assert r["prompt"] == ds.meta.tasks[ep["task_index"]]["prompt"]
        want = [{"name": n, "format": ds.load_camera(n, r["id"]).format} for n in ds.camera_names]
        assert r["cameras"] == want and {c["format"] for c in want} <= {"video", "image"}
        assert r["verdict"] is None  # no report: nothing to judge by (a LeRobot dataset has no valid flag)
    assert get_json(server, "/api/episode/99", 404)["error"].endswith(f"no episode '99' in {ds.lerobot.info_path}")


def test_an_episode_gives_its_streams_for_the_plots_and_its_cameras(served):
    server, path, _ = served
    ds = Dataset(path)
    for ep_id in ds.episode_ids:
        ep = get_json(server, f"/api/episode/{ep_id}")
        obs, act = ds.streams(ep_id, "obs"), ds.streams(ep_id, "action")
        cams = ds.load_cameras(ep_id)
        assert ep["errors"] == [] and ep["t0_ns"] == "0"  # LeRobot episodes start at 0 ns
        last = max([int(s.timestamps[-1]) for s in [*obs.values(), *act.values()]]
                   + [int(c.timestamps[-1]) for c in cams.values()])
        assert ep["duration_ns"] == last
        assert [c["name"] for c in ep["cameras"]] == ds.camera_names
        for c in ep["cameras"]:
            stamps = cams[c["name"]].timestamps
            assert c["frames"] == len(stamps) == ds.lerobot.episode_row(ep_id)["length"]
            assert c["t_ns"] == stamps.tolist() and c["stamps"] == [str(x) for x in stamps]
            assert c["format"] in ("video", "image")
        panels = {p["id"]: p for p in ep["panels"]}
        arms = [k.rsplit("/", 1)[0] for k in obs if k.startswith("arms/") and k.endswith("/qpos")]
        generic = [k for k in obs if k.startswith("lerobot/")]
        assert arms or generic
        assert set(panels) == {f"{a}/{attr}" for a in arms for attr in ("qpos", "qvel") if f"{a}/{attr}" in obs} \
            | set(generic)
        for a in arms:  # the arms in radians: qpos with the command, as the reader gives them
            qpos = panels[f"{a}/qpos"]
            assert [s["label"] for s in qpos["series"]] == ["obs", "command"] and "rad" in qpos["title"]
            for s, stream in zip(qpos["series"], (obs[f"{a}/qpos"], act[f"{a}/qpos"])):
                assert np.allclose(np.array(s["v"]).T, stream.values, atol=6e-6)
                assert np.allclose(s["t"], stream.timestamps / 1e9, atol=1e-6)
        for key in generic:  # another robot's features: as stored, the state with the action as its command
            p = panels[key]
            assert "as stored" in p["title"] and p["columns"] == list(obs[key].columns)
            assert np.allclose(np.array(p["series"][0]["v"]).T, obs[key].values, atol=6e-5)
            if key == "lerobot/observation.state" and "lerobot/action" in act:
                assert [s["label"] for s in p["series"]] == ["obs", "command"]
                assert np.allclose(np.array(p["series"][1]["v"]).T, act["lerobot/action"].values, atol=6e-5)


def test_frames_are_the_cameras_jpeg(served):
    server, path, _ = served
    ds = Dataset(path)
    for ep_id in ds.episode_ids:
        for name in ds.camera_names:
            cam = ds.load_camera(name, ep_id)
            for k in sorted({0, 1, len(cam) // 2, len(cam) - 1}):
                code, headers, body = get(server, f"/api/frame/{ep_id}/{name}/{cam.timestamps[k]}.jpeg")
                assert code == 200 and headers["Content-Type"] == "image/jpeg", (code, body[:300])
                assert body == cam.read_bytes(k)
                with Image.open(io.BytesIO(body)) as im:
                    assert im.format == "JPEG" and (im.height, im.width) == cam.load_frame(k).shape[:2]
    cam = ds.load_camera(ds.camera_names[0], ds.episode_ids[0])
    off_grid = int(cam.timestamps[1]) + 1  # no frame stamped there: nothing is served
    code, _, body = get(server, f"/api/frame/{ds.episode_ids[0]}/{cam.name}/{off_grid}.jpeg")
    assert code == 404 and b"no frame stamped" in body
    code, _, body = get(server, f"/api/frame/{ds.episode_ids[0]}/nocam/0.jpeg")
    assert code == 404 and b"info.json" in body


def test_reading_wrote_nothing_into_the_dataset(served):
    server, path, before = served
    ds = Dataset(path)
    get_json(server, "/api/episodes")
    for ep_id in ds.episode_ids:
        for c in get_json(server, f"/api/episode/{ep_id}")["cameras"]:
            assert get(server, f"/api/frame/{ep_id}/{c['name']}/{c['stamps'][-1]}.jpeg")[0] == 200
    assert tree_hashes(path) == before  # no file changed, none appeared (hashes by relative path)


# ------------------------------------------------------------------ the validator's findings
def test_validation_shows_a_shifted_timestamp_at_its_episode_and_time(export, tmp_path):
    from openarm_sim_dataset.view import open_viewer

    path = tmp_path / "shifted"
    shutil.copytree(export, path)
    shift_timestamp(path)
    stamp = int(Dataset(path).lerobot.row_timestamps("1")[SHIFT_ROW])
    assert abs(stamp - (SHIFT_ROW / FPS + SHIFT_S) * 1e9) < 1e6  # off the grid: its own time
    before = tree_hashes(path)
    server = open_viewer(path, port=0, validate=True)  # dataset-view DIR --validate
    server.serve_in_thread()
    try:
        deadline = time.monotonic() + 120
        while (st := get_json(server, "/api/validation"))["state"] == "running" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert st["state"] == "done" and st["valid"] is False, st
        failed = {r["check"] for r in st["rows"] if r["status"] == "fail"}
        assert "lerobot_timestamps" in failed, st["rows"]
        rows = {r["id"]: r for r in get_json(server, "/api/episodes")["episodes"]}
        assert rows["1"]["verdict"] == "invalid" and rows["1"]["findings"] >= 1
        assert "lerobot_timestamps" in {c["check"] for c in rows["1"]["checks"]}
        assert "lerobot_timestamps" not in {c["check"] for r in (rows["0"], rows["2"]) for c in r["checks"]}
        ep = get_json(server, "/api/episode/1")
        marks = [f for f in ep["findings"] if f["check"] == "lerobot_timestamps"]
        assert len(marks) == 1, ep["findings"]
        (f,) = marks
        # at its time on the timeline (ns from the episode's first stamp, 0 here), and its exact stamp
        assert ep["t0_ns"] == "0" and abs(f["t_ns"] - stamp) < 1_000_000 and f["stamp"] == str(f["t_ns"])
        assert f["where"] == "timestamp" and "frame 17" in f["what"] and f["level"] == "fail"
        assert not [x for x in get_json(server, "/api/episode/0")["findings"] if x["check"] == "lerobot_timestamps"]
        # the finding's time is one of the plotted samples: the stream's own stamp of the shifted row
        qpos = next(p for p in ep["panels"] if p["id"].endswith("/qpos"))
        assert round(f["t_ns"] / 1e9, 6) in qpos["series"][0]["t"]
    finally:
        server.shutdown()
        server.server_close()
    assert tree_hashes(path) == before  # validating (--no-update-metadata) wrote nothing either


# ------------------------------------------------------------------ refusals and reloads
def test_a_video_outside_the_dataset_is_not_served(export, tmp_path):
    from openarm_sim_dataset.view import open_viewer

    path = tmp_path / "linked"
    shutil.copytree(export, path)
    ds = Dataset(path)
    name = ds.camera_names[0]
    cam = ds.load_camera(name, "0")
    stamp = cam.timestamps[0]
    outside = tmp_path / "outside.mp4"
    shutil.move(cam.path, outside)
    cam.path.symlink_to(outside)  # the reader follows it; the viewer refuses a file outside the dataset
    server = open_viewer(path, port=0)
    server.serve_in_thread()
    try:
        code, _, body = get(server, f"/api/frame/0/{name}/{stamp}.jpeg")
        assert code == 404 and b"outside the dataset" in body
        ep = get_json(server, "/api/episode/0")
        assert name not in [c["name"] for c in ep["cameras"]]
        assert any("outside the dataset" in e for e in ep["errors"])
        other = ds.camera_names[1]
        assert get(server, f"/api/frame/0/{other}/{stamp}.jpeg")[0] == 200  # the others still are
    finally:
        server.shutdown()
        server.server_close()


def test_a_changed_info_json_is_read_again(export, tmp_path):
    from openarm_sim_dataset.view import open_viewer

    path = tmp_path / "changed"
    shutil.copytree(export, path)
    server = open_viewer(path, port=0)
    server.serve_in_thread()
    try:
        assert get_json(server, "/api/dataset")["lerobot"]["robot_type"] == "openarm_bimanual"
        info = path / "meta/info.json"
        doc = json.loads(info.read_text())
        doc["robot_type"] = "another_robot_type"
        info.write_text(json.dumps(doc, indent=2))
        assert get_json(server, "/api/dataset")["lerobot"]["robot_type"] == "another_robot_type"
    finally:
        server.shutdown()
        server.server_close()


# ------------------------------------------------------------------ in a real browser (slow set)
SHOWN = ("[...document.querySelectorAll('figure.camera')].every(f => f.dataset.shownTs && "
         "f.dataset.shownTs === f.dataset.wantTs)")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["export", "v30_bi_openarm_av1"])
def test_browser_shows_the_decoded_frame_at_the_time(name, export, browser):
    from openarm_sim_dataset.view import open_viewer

    path = _dataset(name, export)
    ds = Dataset(path)
    ep_id = ds.episode_ids[-1]
    server = open_viewer(path, port=0)
    server.serve_in_thread()
    b = browser
    try:
        b.goto(server.url + "#/")
        b.wait(f"document.body.dataset.page === 'list' && "
               f"document.querySelectorAll('#episodes tbody tr').length === {ds.num_episodes}")
        t_s = 0.55
        b.goto(server.url + f"#/episode/{ep_id}?t={t_s}")
        b.wait(f"document.body.dataset.page === 'episode' && "
               f"document.querySelector('h1').textContent === 'Episode {ep_id}' && {SHOWN}")
        assert b.js("document.querySelectorAll('#plots canvas').length") >= 1
        for name_ in ds.camera_names:
            cam = ds.load_camera(name_, ep_id)
            i = int(np.searchsorted(cam.timestamps, round(t_s * 1e9), side="right")) - 1
            fig = f"figure.camera[data-camera='{name_}']"
            assert b.js(f"document.querySelector(\"{fig}\").dataset.shownTs") == str(cam.timestamps[i])
            scale = int(b.js(f"+document.querySelector(\"{fig}\").dataset.scale"))
            r = b.rect(f"{fig} img")
            png = b.screenshot({"x": r["x"], "y": r["y"], "width": r["width"], "height": r["height"]})
            screen = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(np.int16)

            def served_frame(k: int) -> np.ndarray:  # the JPEG the viewer serves, decoded, scaled as shown
                img = np.asarray(Image.open(io.BytesIO(cam.read_bytes(k))).convert("RGB")).astype(np.int16)
                return img.repeat(scale, axis=0).repeat(scale, axis=1)

            diffs = [float(np.abs(screen - served_frame(k)).mean()) for k in range(len(cam))]
            assert diffs[i] < 1.0 and diffs[i] == min(diffs), (name_, i, diffs[i], int(np.argmin(diffs)))
    finally:
        server.shutdown()
        server.server_close()
