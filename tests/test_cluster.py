"""The Ray front (cluster.py) without a cluster: a missing ray is one line naming the pip install, bad
--ray arguments are refused before any output exists, and environment differences are named."""

from __future__ import annotations

import sys

import pytest
from conftest import TINY, run_cli

from openarm_sim_dataset.cluster import RAY_MISSING, differences


@pytest.fixture
def no_ray(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError, as when it is absent


def test_generate_without_ray_is_one_line_naming_pip_install(no_ray, tmp_path):
    out = tmp_path / "out"
    r = run_cli("generate", "--out", out, "--episodes", "1", *TINY, "--ray", check=2)
    assert r.stderr == f"dataset-generate: error: {RAY_MISSING}\n"
    assert "pip install 'openarm-sim-dataset[ray]'" in r.stderr
    assert not out.exists() and not r.stdout


def test_validate_without_ray_is_one_line_naming_pip_install(no_ray, generated_one):
    meta = (generated_one / "metadata.yaml").read_bytes()
    r = run_cli("validate", generated_one, "--ray", "--no-update-metadata", check=2)
    assert r.stderr == f"dataset-validate: error: {RAY_MISSING}\n"
    assert (generated_one / "metadata.yaml").read_bytes() == meta


@pytest.mark.parametrize("args, words", [
    (["--ray-shared-fs"], "need --ray"),
    (["--ray-max-in-flight", "2"], "need --ray"),
    (["--ray", "--workers", "2"], "exclude each other"),
    (["--ray", "--ray-max-in-flight", "0"], "must be >= 1"),
])
def test_bad_ray_arguments_refused_before_any_output(tmp_path, args, words):
    out = tmp_path / "out"
    r = run_cli("generate", "--out", out, "--episodes", "1", *TINY, *args, check=2)
    assert words in r.stderr and r.stderr.count("\n") == 1
    assert not out.exists()


def test_differences_name_what_differs():
    driver = {"mujoco": "3.3.0", "model_sha256": "a" * 64, "asset_sha256": {"x.xml": "1", "m.stl": "2"},
              "numpy": "2.0"}
    worker = dict(driver, mujoco="3.2.7", model_sha256="b" * 64, asset_sha256={"x.xml": "9", "m.stl": "2"})
    assert differences(driver, driver) == []
    assert differences(driver, worker) == ["mujoco: driver '3.3.0', worker '3.2.7'",
                                           f"model_sha256: driver {'a' * 12}, worker {'b' * 12}",
                                           "asset files differ: x.xml"]
    assert differences(driver, {k: v for k, v in driver.items() if k != "numpy"}) == ["numpy: driver '2.0', worker None"]


def test_unreachable_cluster_is_one_line_before_any_output(tmp_path):
    pytest.importorskip("ray")
    import socket

    with socket.socket() as s:  # a port that is bound but never listened on: connections are refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        out = tmp_path / "out"
        r = run_cli("generate", "--out", out, "--episodes", "1", *TINY, "--ray", f"127.0.0.1:{port}", check=2)
        assert r.stderr.startswith(f"dataset-generate: error: 127.0.0.1:{port}: cannot reach the Ray cluster")
        assert r.stderr.count("\n") == 1 and not out.exists()
        r = run_cli("generate", "--out", out, "--episodes", "1", *TINY, "--ray", "nonsense", check=2)
        assert "not a Ray address" in r.stderr and not out.exists()


def test_connected_output_takes_the_lock_after_connecting_and_releases_it(tmp_path, no_ray):
    from openarm_sim_dataset.cluster import ConnectedOutput, RayOptions
    from openarm_sim_dataset.sim.generate import OutputLock

    out = tmp_path / "out"
    first = ConnectedOutput(None, lambda: OutputLock(out))
    with pytest.raises(Exception, match="lock held"):  # the same output, a second writer: refused
        ConnectedOutput(None, lambda: OutputLock(out))
    first.close()
    ConnectedOutput(None, lambda: OutputLock(out)).close()  # released: taken again
    taken = []
    with pytest.raises(ImportError, match="pip install"):  # no ray: refused before the lock is touched
        ConnectedOutput(RayOptions(), lambda: taken.append(1))
    assert taken == []
