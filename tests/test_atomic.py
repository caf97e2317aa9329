"""Atomic writes clean up after killed processes, and only after dead ones."""

from __future__ import annotations

import os
import subprocess
import sys

from openarm_sim_dataset.atomic import atomic_write_bytes
from openarm_sim_dataset.writer import create_dataset_root


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_leftovers_of_dead_writers_are_removed_live_ones_kept(tmp_path):
    dead, live = dead_pid(), os.getpid()
    (tmp_path / f".tmp-out.{dead}.deadbeef").mkdir()  # a killed convert/merge
    (tmp_path / f".tmp-out.{live}.cafecafe").mkdir()  # a concurrent live writer
    (tmp_path / f".tmp-metadata.yaml.{dead}.0badf00d").write_text("half")  # a killed validate
    tmp = create_dataset_root(tmp_path / "out")
    names = sorted(p.name for p in tmp_path.iterdir())
    assert f".tmp-out.{dead}.deadbeef" not in names and f".tmp-out.{live}.cafecafe" in names
    atomic_write_bytes(tmp_path / "metadata.yaml", b"version: '0.4.0'\n")
    assert not (tmp_path / f".tmp-metadata.yaml.{dead}.0badf00d").exists()
    assert (tmp_path / "metadata.yaml").read_bytes() == b"version: '0.4.0'\n"
    assert tmp.is_dir()
