"""dataset-info figures against the data they describe, the dataset card, and the CLI's refusals."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
import yaml
from conftest import ALL_FIXTURES, REPO, fixture_path

from openarm_sim_dataset import Dataset, layout
from openarm_sim_dataset.card import write_card
from openarm_sim_dataset.cli import info as info_cli
from openarm_sim_dataset.info import dataset_info
from openarm_sim_dataset.report import tree_bytes
from openarm_sim_dataset.stats import wilson_interval
from openarm_sim_dataset.validate import write_valid_flags
from openarm_sim_dataset.validate.core import validation_time


def expected_figures(root) -> dict:
    """The same figures computed the slow way: every stream read in full, every camera indexed."""
    ds = Dataset(root)
    durations, rows, frames, successes = [], {}, {}, 0
    for ep in ds.episodes:
        stamps = []
        for kind in layout.KINDS:
            per_prefix = {}  # attributes of one component share their stamps: count its rows once
            for key, s in ds.streams(ep, kind).items():
                per_prefix[key.rsplit("/", 1)[0]] = len(s)
                stamps.append(s.timestamps)
            for prefix, n in per_prefix.items():
                rows[(kind, prefix)] = rows.get((kind, prefix), 0) + n
        allst = np.concatenate(stamps)
        durations.append((allst.max() - allst.min()) / 1e9)
        for name, cam in ds.load_cameras(ep).items():
            frames[name] = frames.get(name, 0) + cam.num_frames
        successes += ep.get("success") is True
    return {"durations": durations, "rows": rows, "frames": frames, "successes": successes, "n": ds.num_episodes}


def check_matches(root) -> dict:
    info = dataset_info(root)
    want = expected_figures(root)
    e = info["episodes"]
    assert e["count"] == want["n"] and e["successes"] == want["successes"]
    assert e["wilson95"] == list(wilson_interval(want["successes"], want["n"]))
    assert [ep["duration_s"] for ep in e["per_episode"]] == pytest.approx(want["durations"], abs=1e-9)
    assert e["duration_s"]["total"] == pytest.approx(sum(want["durations"]))
    assert {(s["kind"], s["prefix"]): s["rows"] for s in info["streams"]} == want["rows"]
    assert {c["name"]: c["frames"] for c in info["cameras"]} == want["frames"]
    sizes = info["disk_bytes"]
    assert sizes["total"] == tree_bytes(root) == sum(v for k, v in sizes.items() if k != "total")
    assert sizes["parquet"] == sum(p.stat().st_size for p in root.rglob("*.parquet"))
    assert sizes["images"] > 0 and all(c["size"] for c in info["cameras"])
    return info


def test_info_matches_a_generated_dataset(generated):
    info = check_matches(generated)
    sim = Dataset(generated).meta.simulation
    p = info["provenance"]
    assert p["seed"] == sim["seed"] and p["mujoco_version"] == sim["mujoco_version"]
    assert p["model_sha256"] == sim["model_sha256"][:12]
    assert info["disk_bytes"]["sidecar"] == sum(p.stat().st_size for p in generated.glob("episodes/*/sim/*"))
    manifests = sum(p.stat().st_size for p in generated.glob("episodes/*/manifest.sha256"))
    manifests += sum(p.stat().st_size for p in generated.glob("episodes/*/summary.json"))  # read from the summaries
    assert manifests > 0 and info["disk_bytes"]["metadata"] == manifests + (generated / "metadata.yaml").stat().st_size
    assert info["disk_bytes"]["other"] == 0
    assert {tuple(c["size"]) for c in info["cameras"]} == {(128, 96)}  # from the JPEG header
    assert all(s["measured_hz"] == pytest.approx(250.0) for s in info["streams"])


@pytest.mark.parametrize("kind,name", ALL_FIXTURES)
def test_info_matches_each_fixture(kind, name):
    info = check_matches(fixture_path(kind, name))
    assert info["provenance"] is None and not info["simulated"]


def test_several_tasks_and_valid_flags_with_their_time(generated, tmp_path, monkeypatch):
    copy = tmp_path / "ds"
    shutil.copytree(generated, copy)
    ds = Dataset(copy)
    ds.meta.data["tasks"].append({"prompt": "Second task.", "description": "d"})
    ds.meta.episodes[1]["task_index"] = 1
    ds.meta.episodes[1]["success"] = False
    ds.meta.write(copy)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1800000000")
    assert validation_time() == "2027-01-15T08:00:00Z"
    write_valid_flags(Dataset(copy), {"0": True})
    info = dataset_info(copy)
    assert [(t["count"], t["successes"]) for t in info["tasks"]] == [(1, 1), (1, 0)]
    assert info["tasks"][1]["wilson95"] == list(wilson_interval(0, 1))
    assert info["episodes"]["valid"] == {"true": 1, "false": 0, "unset": 1, "validated_at": ["2027-01-15T08:00:00Z"] * 2}
    assert yaml.safe_load((copy / "metadata.yaml").read_text())["episodes"][0]["validated_at"] == "2027-01-15T08:00:00Z"


def test_cli_text_and_json(generated, capsys):
    assert info_cli.main([str(generated), "--episodes"]) == 0
    text = capsys.readouterr().out
    assert "success    2/2 = 100.0% (95% Wilson interval 34.2%-100.0%)" in text and "head" in text and "MuJoCo" in text
    assert info_cli.main([str(generated), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["episodes"]["count"] == 2


def test_cli_imports_no_heavy_module(generated):
    """Parsing arguments, reading metadata, stamps and listings: no pandas, MuJoCo or matplotlib."""
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "openarm_sim_dataset.cli.info", str(generated), "--json"],
                       capture_output=True, text=True, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in r.stderr.splitlines() if line.startswith("import time:")}
    assert "openarm_sim_dataset" in imported and "pyarrow" in imported
    assert not imported & {"pandas", "mujoco", "matplotlib", "rerun"}, imported & {"pandas", "mujoco", "matplotlib", "rerun"}


def test_card_header_parses_and_dataset_stays_valid(generated, tmp_path, capsys):
    import openarm_dataset as od

    copy = tmp_path / "ds"
    shutil.copytree(generated, copy)
    assert info_cli.main([str(copy), "--card", "--license", "apache-2.0"]) == 0
    text = (copy / layout.CARD_FILE).read_text()
    assert text.startswith("---\n")
    header = yaml.safe_load(text.split("---\n")[1])
    assert header["license"] == "apache-2.0" and header["task_categories"] == ["robotics"]
    assert header["size_categories"] == ["n<1K"] and "simulation" in header["tags"]
    body = text.split("---\n", 2)[2]
    assert "Put the red cube in the tray." in body and "2/2 (100.0%; 95% Wilson 34.2%-100.0%)" in body
    assert "LeRobotDataset" in body and "dataset-convert" in body
    rows = Dataset(copy).validate(simulation=False)
    assert all(r.passed or r.skipped for r in rows), [r for r in rows if not r.passed]
    assert od.Dataset(str(copy)).meta.episodes  # the reference reader ignores the card
    out = tmp_path / "card.md"
    write_card(generated, out)
    assert not (generated / layout.CARD_FILE).exists() and yaml.safe_load(out.read_text().split("---\n")[1])["license"] == "unknown"


@pytest.mark.parametrize("args,needle", [
    (["{missing}"], "no such folder"),
    (["{missing}", "--card"], "no such folder"),
])
def test_cli_errors_are_one_line(tmp_path, capsys, args, needle):
    argv = [a.format(missing=tmp_path / "nope") for a in args]
    assert info_cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dataset-info: error: ") and needle in err
