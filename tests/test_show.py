"""dataset-show pictures from stored data: pixel-exact panels, label colours, plots, contact sheets, refusals."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import fixture_path
from PIL import Image

from openarm_sim_dataset import Dataset
from openarm_sim_dataset.cli import show as show_cli
from openarm_sim_dataset.show import contact_sheet, label_palette, label_table, plot_episode, show_frame

pytest.importorskip("matplotlib")


def png(path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("RGB"))


def crop(img: np.ndarray, box) -> np.ndarray:
    x0, y0, x1, y1 = box
    return img[y0:y1, x0:x1]


def colours(a: np.ndarray) -> set[tuple[int, int, int]]:
    return {tuple(int(v) for v in c) for c in np.unique(a.reshape(-1, 3), axis=0)}


@pytest.mark.slow
def test_simulated_frame_panels_hold_the_stored_data(generated, tmp_path):
    ds = Dataset(generated)
    lay = show_frame(ds, "1", tmp_path / "f.png", frame=20)
    img = png(lay.path)
    assert img.shape[:2] == (lay.size[1], lay.size[0])
    sim = ds.sim_streams("1")
    pal = label_palette(label_table(ds))
    assert set(lay.panels) == {(c, col) for c in ds.camera_names for col in ("rgb", "depth", "labels")}
    for cam in ds.camera_names:
        labels = sim[f"labels/{cam}"][1][20]
        panel = crop(img, lay.panels[(cam, "labels")])
        assert panel.shape[:2] == (labels.shape[0] * lay.scale, labels.shape[1] * lay.scale)
        # exactly the colours of the labels present in this frame, pixel for pixel
        assert colours(panel) == {tuple(int(v) for v in pal[x]) for x in np.unique(labels)}
        assert np.array_equal(panel, np.repeat(np.repeat(pal[labels], lay.scale, 0), lay.scale, 1))
        rgb = ds.load_camera(cam, "1").get_frame(20).load()
        assert np.array_equal(crop(img, lay.panels[(cam, "rgb")]), np.repeat(np.repeat(rgb, lay.scale, 0), lay.scale, 1))
        # a colour map, not a flat panel (the resting left arm's wrist view, table and floor, spans fewer depths: 14)
        assert len(colours(crop(img, lay.panels[(cam, "depth")]))) > (10 if cam == "wrist_left" else 20)
    wrist = sim["labels/wrist_right"][1][20]
    assert set(np.unique(wrist)) != set(np.unique(sim["labels/head"][1][20]))  # the two panels really differ


def test_time_selects_the_last_frame_at_or_before(generated, tmp_path):
    ds = Dataset(generated)
    lay = show_frame(ds, "0", tmp_path / "t.png", time_s=1.3)  # frames every 0.2 s
    assert lay.frame == 6


def test_recorded_dataset_shows_rgb_only(tmp_path):
    ds = Dataset(fixture_path("own", "dataset_0.4.0_tar"))
    lay = show_frame(ds, 0, tmp_path / "r.png", frame=3)
    assert {col for _, col in lay.panels} == {"rgb"} and len(lay.panels) == len(ds.camera_names)
    img = png(lay.path)
    first = ds.load_camera(ds.camera_names[0], 0).get_frame(3).load()
    assert np.array_equal(crop(img, lay.panels[(ds.camera_names[0], "rgb")]),
                          np.repeat(np.repeat(first, lay.scale, 0), lay.scale, 1))


def test_plot_and_contact_sheets(generated, tmp_path):
    ds = Dataset(generated)
    out = plot_episode(ds, "0", tmp_path / "p.png", hz=5)
    assert png(out).shape[0] > 500
    lay = contact_sheet(ds, tmp_path / "c.png")
    assert sorted(e for e, _ in lay.panels) == ["0", "1"]
    assert len(contact_sheet(ds, tmp_path / "t.png", per="task").panels) == 1


def test_cli_writes_frame_and_plot(generated, tmp_path, capsys):
    assert show_cli.main([str(generated), "--episode", "0", "--frame", "2", "-o", str(tmp_path / "a.png"), "--plot"]) == 0
    assert (tmp_path / "a.png").is_file() and (tmp_path / "a-plot.png").is_file()
    assert "written to" in capsys.readouterr().out
    assert show_cli.main([str(generated), "--contact-sheet", "-o", str(tmp_path / "s.png")]) == 0


@pytest.mark.parametrize("args,needle", [
    (["{missing}", "-o", "{out}"], "no such folder"),
    (["{ds}", "--episode", "7", "-o", "{out}"], "no episode with id '7'"),
    (["{ds}", "--episode", "0", "--frame", "999", "-o", "{out}"], "no frame 999"),
    (["{ds}", "--episode", "0", "--time", "99", "-o", "{out}"], "time 99 s is outside"),
    (["{ds}", "--contact-sheet", "--camera", "nope", "-o", "{out}"], "no camera 'nope'"),
])
def test_cli_errors_are_one_line_and_write_nothing(generated, tmp_path, capsys, args, needle):
    out = tmp_path / "x.png"
    argv = [a.format(missing=tmp_path / "nope", ds=generated, out=out) for a in args]
    assert show_cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dataset-show: error: ") and needle in err, err
    assert list(tmp_path.iterdir()) == []
