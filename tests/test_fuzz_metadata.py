"""Fuzzing metadata.yaml (hypothesis, bounded): whatever the document, reading either works or raises a
documented DatasetError naming the file — never another exception, never a hang, never a write."""

from __future__ import annotations

import copy
import math
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from conftest import FUZZ_EXAMPLES, OWN_FIXTURES
from hypothesis import HealthCheck, given, settings, strategies as st

from openarm_sim_dataset import Dataset
from openarm_sim_dataset.errors import DatasetError

pytest.importorskip("hypothesis")

GOOD = yaml.safe_load((OWN_FIXTURES / "dataset_0.4.0" / "metadata.yaml").read_text())
FUZZ = settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20), st.sampled_from(["0", "7", "..", "/etc", "a/b", "head", "OpenArm", "0.4.0", "x" * 200, "\x00"]),
)
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=12)


#: one worker runs this module (pytest-xdist --dist loadgroup): its module fixtures are built once
pytestmark = pytest.mark.xdist_group("test_fuzz_metadata")

def _paths(node, prefix=()):
    """Every key path of a YAML document (mapping keys and list indices)."""
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


ALL_PATHS = [p for p in _paths(GOOD) if p]


@st.composite
def mutated_docs(draw):
    doc = copy.deepcopy(GOOD)
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(ALL_PATHS))
        node = doc
        try:
            for k in path[:-1]:
                node = node[k]
            op = draw(st.sampled_from(["set", "delete", "add"]))
            if op == "set":
                node[path[-1]] = draw(values)
            elif op == "delete":
                del node[path[-1]]
            elif isinstance(node, dict):
                node[draw(st.one_of(st.text(max_size=8), st.integers(), st.none(), st.booleans()))] = draw(values)
            elif isinstance(node, list):
                node.append(draw(values))
        except (KeyError, IndexError, TypeError):
            pass  # an earlier mutation removed or replaced the parent
    return doc


@pytest.fixture(scope="module")
def root():
    with tempfile.TemporaryDirectory() as d:
        dst = Path(d) / "a" / "ds"
        shutil.copytree(OWN_FIXTURES / "dataset_0.4.0", dst)
        yield dst


def read_everything(root: Path) -> None:
    ds = Dataset(root)
    for ep in ds.episode_ids:
        ds.streams(ep, "obs")
        ds.streams(ep, "action")
        for cam in ds.load_cameras(ep).values():
            cam.get_frame(0).load()
    for _ in ds.sample(5):
        pass
    ds.meta.dump()  # what a writer would write back


def check(root: Path, data: bytes) -> None:
    meta = root / "metadata.yaml"
    meta.write_bytes(data)
    before = sorted(p.relative_to(root.parent).as_posix() for p in root.parent.rglob("*"))
    try:
        read_everything(root)
    except DatasetError as e:
        assert str(e).count("\n") == 0, str(e)
        assert e.path is not None and str(root) in str(e), str(e)
    after = sorted(p.relative_to(root.parent).as_posix() for p in root.parent.rglob("*"))
    assert after == before


@FUZZ
@given(doc=mutated_docs())
def test_mutated_documents(root, doc):
    try:
        data = yaml.safe_dump(doc, sort_keys=False).encode()
    except yaml.YAMLError:
        return
    check(root, data)


@FUZZ
@given(text=st.one_of(st.text(max_size=300), st.binary(max_size=300).map(lambda b: b.decode("latin-1"))))
def test_arbitrary_text(root, text):
    check(root, text.encode("utf-8", "surrogatepass") if text else b"")


@FUZZ
@given(top=st.dictionaries(st.sampled_from(list(GOOD) + ["meta", "simulation"]), values, max_size=8))
def test_arbitrary_top_level_mappings(root, top):
    check(root, yaml.safe_dump(top).encode())


def test_floats_that_yaml_writes_specially(root):
    for hz in (math.nan, math.inf, -math.inf, 1e-300, 1e300):
        doc = copy.deepcopy(GOOD)
        doc["frequencies"]["cameras"]["head"] = hz
        check(root, yaml.safe_dump(doc).encode())
