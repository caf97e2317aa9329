"""The dataset card: a ``README.md`` with a YAML header that a dataset hub reads, built offline.

Written at the top of the dataset (``layout.CARD_FILE``), a path that neither this package nor
``openarm_dataset`` opens, so a dataset with a card stays valid and reads the same. Every figure
comes from :func:`openarm_sim_dataset.info.dataset_info`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from openarm_sim_dataset.core import layout
from openarm_sim_dataset.core.atomic import atomic_write_bytes

from .info import dataset_info, human_bytes

#: Hub size categories by number of episodes (upper bound exclusive, label).
_SIZE_CATEGORIES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"))


def size_category(n: int) -> str:
    """The hub's ``size_categories`` label for ``n`` examples (here: episodes)."""
    for bound, label in _SIZE_CATEGORIES:
        if n < bound:
            return label
    return "n>1M"


def card_header(info: dict[str, Any], license: str | None = None) -> dict[str, Any]:
    """The YAML header: license (argument, else metadata's ``license``, else ``unknown``), task
    categories, tags, size category of the episode count, and a pretty name."""
    if info.get("lerobot"):  # read in place: a LeRobot dataset, OpenArm if the reader found an arm in it
        tags = ["LeRobot", "robotics"] + (["openarm"] if any(s["prefix"].startswith("arms/") for s in info["streams"]) else [])
    else:
        tags = ["openarm", "robotics", "LeRobot-convertible"]
        tags.append("simulation" if info["simulated"] else "real-robot")
        if info["simulated"]:
            tags.append("mujoco")
    return {
        "license": license or info.get("license") or "unknown",
        "task_categories": ["robotics"],
        "tags": tags,
        "size_categories": [size_category(info["episodes"]["count"])],
        "pretty_name": Path(info["path"]).resolve().name,
    }


def _interval(rate: dict) -> str:
    if not rate["count"]:
        return "-"
    lo, hi = rate["wilson95"]
    return f"{rate['successes']}/{rate['count']} ({rate['success_rate']:.1%}; 95% Wilson {lo:.1%}-{hi:.1%})"


def card_markdown(info: dict[str, Any], license: str | None = None) -> str:
    """The whole card: YAML front matter, then the body (tasks, episodes, streams, cameras,
    provenance, how to load)."""
    header = yaml.safe_dump(card_header(info, license), sort_keys=False, allow_unicode=True)
    e, d = info["episodes"], info["episodes"]["duration_s"]
    name = Path(info["path"]).resolve().name
    kind = "simulated in MuJoCo" if info["simulated"] else "recorded"
    lr = info.get("lerobot")
    what = (f"A LeRobot {lr['codebase_version']} dataset (robot_type {lr['robot_type']}, {lr['fps']:g} fps)" if lr
            else f"An OpenArm dataset ({kind}), OpenArm Dataset layout {info['version']}")
    out = [f"---\n{header}---", "", f"# {name}", "",
           f"{what}: {e['count']} episodes, "
           f"{d['total']:.1f} s of data, {human_bytes(info['disk_bytes']['total'])} on disk. "
           "This card was written by `dataset-info --card` (openarm_sim_dataset) from the dataset's files.", ""]
    out += ["## Tasks", "", "| # | prompt | description | episodes | success |", "|---|---|---|---|---|"]
    for t in info["tasks"]:
        out.append(f"| {t['index']} | {_cell(t['prompt'])} | {_cell(t['description'])} | {t['count']} | {_interval(t)} |")
    v = e["valid"]
    when = v["validated_at"]
    out += ["", "## Episodes", "",
            f"- {e['count']} episodes; duration per episode min {d['min']:.2f} s, median {d['median']:.2f} s, "
            f"max {d['max']:.2f} s; {d['total']:.1f} s in total",
            f"- success: {_interval(e)}",
            f"- validation (`dataset-validate`): {v['true']} valid, {v['false']} invalid, {v['unset']} not validated"
            + (f" (flags written {when[0]}" + ("" if when[0] == when[1] else f" .. {when[1]}") + ")" if when else ""),
            "", "## Streams", "",
            "Per arm, 8 values a row: joint1..joint7 (rad; qvel rad/s; qtorque N·m) and the gripper; "
            "`pose`: x, y, z (m), qw, qx, qy, qz, gripper. Timestamps int64 ns. See the package's `docs/format.md`.", "",
            "| kind | component | attributes | rows | declared | measured |", "|---|---|---|---|---|---|"]
    for s in info["streams"]:
        out.append(f"| {s['kind']} | {s['prefix']} | {', '.join(s['attributes'])} | {s['rows']} | "
                   f"{_hz(s['declared_hz'])} | {_hz(s['measured_hz'])} |")
    out += ["", "## Cameras", ""]
    if info["cameras"]:
        out += ["| camera | size | frames | per episode | rate | stored as |", "|---|---|---|---|---|---|"]
        for c in info["cameras"]:
            size = f"{c['size'][0]}x{c['size'][1]}" if c["size"] else ", ".join(f"{w}x{h}" for w, h in c["sizes"])
            fpe = c["frames_per_episode"]
            out.append(f"| {c['name']} | {size} | {c['frames']} | {fpe['min']}-{fpe['max']} | {_hz(c['declared_hz'])} | "
                       f"{_stored_as(c['format'])} |")
    else:
        out.append("No cameras.")
    b = info["disk_bytes"]
    kinds = ("parquet", "video", "metadata") if "video" in b else ("parquet", "images", "sidecar", "metadata")
    out += ["", "Size on disk: " + ", ".join(f"{k} {human_bytes(b[k])}" for k in kinds)
            + f"; total {human_bytes(b['total'])}.", ""]
    p = info["provenance"]
    if p:
        gen = p.get("generator") or {}
        out += ["## Provenance", "",
                f"- simulator: {p['simulator']} {p['mujoco_version']}; model SHA-256 (MJB) `{p['model_sha256']}...`",
                f"- seed {p['seed']} (episode i draws only from `numpy.random.default_rng([seed, i])`); perception "
                f"sigma {p['sigma_m']} m; retry {p['retry']}"
                + (f"; randomization: {p['randomization']}" if p.get("randomization") is not None else ""),
                f"- physics timestep {p['timestep_s']} s; state {_hz(p['state_hz'])}, cameras {_hz(p['camera_hz'])}",
                f"- generator {gen.get('name', '?')} {gen.get('version', '?')}"
                + (f" (git {str(gen['git_commit'])[:12]})" if gen.get("git_commit") else "") + f"; GL: {p['gl_renderer']}",
                "- per episode, `episodes/<id>/sim/` holds the exact physics stream (replay is bit-exact on the same "
                "machine architecture, MuJoCo build and model hash), depth in metres and segmentation labels", ""]
    if lr:
        out += ["## How to load", "", "With this package (`pip install 'openarm-sim-dataset[lerobot]'`), read in place:", "",
                "```python", "from openarm_sim_dataset import Dataset", "", f'ds = Dataset("{name}")',
                "for s in ds.sample(hz=10, decode=True):", '    s.obs, s.cameras', "```", "",
                f"As an OpenArm 0.4.0 dataset: `dataset-convert {name} {name}-openarm --format openarm`.", ""]
        return "\n".join(out)
    out += ["## How to load", "", "With this package (`pip install openarm-sim-dataset`):", "", "```python",
            "from openarm_sim_dataset import Dataset", "", f'ds = Dataset("{name}")',
            "for s in ds.sample(hz=10):            # causal resampling on an integer-ns grid",
            '    s.obs["arms/right/qpos"], s.cameras' + (', s.sim["depth/head"]' if info["simulated"] else ""),
            "```", "", "Look at it: `dataset-info DIR`, `dataset-show DIR --episode 0 -o frame.png`, "
            "`dataset-validate DIR`.", "",
            "With LeRobot, after conversion (`pip install 'openarm-sim-dataset[lerobot]'`):", "", "```bash",
            f"dataset-convert {name} {name}-lerobot --format lerobot_v3.0 --fps 10", "```", "", "```python",
            "from lerobot.datasets.lerobot_dataset import LeRobotDataset", "",
            f'ds = LeRobotDataset("local/{name}", root="{name}-lerobot", video_backend="pyav")', "```", ""]
    return "\n".join(out)


def _stored_as(fmt: str) -> str:
    return {"dir": "JPEG folder", "tar": "JPEG tar", "video": "MP4 video"}.get(fmt, f"JPEG {fmt}")


def _cell(text: Any) -> str:
    return "" if text is None else str(text).replace("|", "\\|").replace("\n", " ")


def _hz(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g} Hz"


def write_card(root: str | os.PathLike, out: str | os.PathLike | None = None, license: str | None = None,
               info: dict[str, Any] | None = None) -> Path:
    """Write the card atomically to ``out`` (default ``<root>/README.md``) and return its path."""
    info = info or dataset_info(root)
    path = Path(out) if out is not None else Path(root) / layout.CARD_FILE
    atomic_write_bytes(path, card_markdown(info, license).encode("utf-8"))
    return path
