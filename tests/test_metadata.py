"""metadata.yaml: schema errors name the file and the key; unknown keys survive a round trip."""

from __future__ import annotations

import shutil

import pytest
import yaml
from conftest import OWN_FIXTURES

from openarm_sim_dataset import Dataset, Metadata, MetadataError


def write_meta(tmp_path, doc) -> object:
    (tmp_path / "metadata.yaml").write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    return tmp_path


def good_doc() -> dict:
    return yaml.safe_load((OWN_FIXTURES / "dataset_0.4.0" / "metadata.yaml").read_text())


def test_unknown_keys_survive_round_trip(tmp_path):
    meta = Metadata.load(OWN_FIXTURES / "dataset_0.4.0")
    meta.write(tmp_path)
    again = yaml.safe_load((tmp_path / "metadata.yaml").read_text())
    assert again["custom_top_level"] == {"survives": True}
    assert again["episodes"][0]["custom_note"] == "kept 0"
    assert again == good_doc()


def test_legacy_metadata_written_as_040_with_renamed_cameras(tmp_path):
    meta = Metadata.load(OWN_FIXTURES / "dataset_unversioned")
    meta.write(tmp_path)
    doc = yaml.safe_load((tmp_path / "metadata.yaml").read_text())
    assert doc["version"] == "0.4.0"
    assert set(doc["equipment"]["perceptions"]["cameras"]) == {"wrist_left", "head"}
    assert doc["equipment"]["embodiments"]["arms"]["id"] == "OpenArm"
    assert [e["id"] for e in doc["episodes"]] == ["0", "7"]


def test_unquoted_integer_ids_are_normalized(tmp_path):
    src = OWN_FIXTURES / "dataset_0.4.0"
    shutil.copytree(src, tmp_path / "ds")
    doc = good_doc()
    for ep in doc["episodes"]:
        ep["id"] = int(ep["id"])
    write_meta(tmp_path / "ds", doc)
    ds = Dataset(tmp_path / "ds")
    assert ds.episode_id(1) == "7"
    assert ds.episode("7") is ds.episode(1)
    assert len(ds.load_obs(7 - 6)["arms/right/qpos"]) > 0


@pytest.mark.parametrize(
    "mutate,expected",
    [
        (lambda d: d.update(version="9.9.9"), "unknown version '9.9.9'"),
        (lambda d: d.update(episodes="nope"), "episodes must be a list"),
        (lambda d: d["episodes"].append({"success": True}), "episodes[2] has no id"),
        (lambda d: d["episodes"].append({"id": "0"}), "listed twice"),
        (lambda d: d["episodes"][0].update(success="yes"), "episodes[0].success must be a boolean"),
        (lambda d: d["episodes"][0].update(task_index=5), "task_index 5"),
        (lambda d: d["episodes"][0].update(id="../../etc"), "not a safe name"),
        (lambda d: d["episodes"][0].update(id="/abs"), "not a safe name"),
        (lambda d: d["episodes"][0].update(id="a/b"), "not a safe name"),
        (lambda d: d["episodes"][0].update(id=".."), "not a safe name"),
        (lambda d: d["episodes"][0].update(id="x" * 300), "not a safe name"),
        (lambda d: d["episodes"][0].update(id=True), "boolean"),
        (lambda d: d["equipment"]["perceptions"]["cameras"].update({"../x": {}}), "not a safe name"),
        (lambda d: d["equipment"]["embodiments"]["arms"].update(id="UR5"), "'UR5' is not one of"),
        (lambda d: d["equipment"].pop("embodiments"), "equipment.embodiments must be a mapping"),
        (lambda d: d["frequencies"]["cameras"].update(head=-1), "frequencies.cameras.head must be a positive"),
        (lambda d: d.pop("equipment"), "equipment must be a mapping"),
    ],
)
def test_schema_errors_name_file_and_key(tmp_path, mutate, expected):
    doc = good_doc()
    mutate(doc)
    write_meta(tmp_path, doc)
    with pytest.raises(MetadataError) as err:
        Metadata.load(tmp_path)
    assert str(tmp_path / "metadata.yaml") in str(err.value)
    assert expected in str(err.value)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("", "must be a mapping"),
        ("- a\n- b\n", "must be a mapping"),
        ("version: [unclosed\n", "invalid YAML"),
        ("!!python/object/apply:os.system ['echo pwned']\n", "invalid YAML"),
        ("a: &x [1, 2]\nb: [*x, *x]\n", "aliases"),
    ],
)
def test_unusable_yaml_is_refused(tmp_path, text, expected):
    write_meta(tmp_path, text)
    with pytest.raises(MetadataError, match=expected):
        Metadata.load(tmp_path)


def test_missing_metadata_and_jsonl(tmp_path):
    with pytest.raises(MetadataError, match="not found"):
        Metadata.load(tmp_path)
    shutil.copy(OWN_FIXTURES / "dataset_unversioned" / "metadata.yaml", tmp_path / "metadata.yaml")
    with pytest.raises(MetadataError, match="episodes.jsonl: not found"):
        Metadata.load(tmp_path)


def test_010_wrist_cameras_renamed_everywhere(tmp_path):
    meta = Metadata.load(OWN_FIXTURES / "dataset_0.1.0")
    assert meta.cameras == ["wrist_left", "head"]
    meta.write(tmp_path)
    doc = yaml.safe_load((tmp_path / "metadata.yaml").read_text())
    assert set(doc["equipment"]["perceptions"]["cameras"]) == {"wrist_left", "head"}
    assert set(doc["frequencies"]["cameras"]) == {"wrist_left", "head"}


def test_fast_loader_reads_what_the_strict_one_reads(tmp_path, generated):
    """libyaml is used only where no anchor or alias can hide, and gives the very same document."""
    from conftest import REF_FIXTURES

    from openarm_sim_dataset.yaml_codec import SafeNoAliasLoader, load_yaml_document, loader_for

    paths = sorted(OWN_FIXTURES.glob("*/metadata.yaml")) + sorted(REF_FIXTURES.glob("*/metadata.yaml"))
    paths.append(generated / "metadata.yaml")  # its prose holds "index * 1e12": still the fast path
    for path in paths:
        text = path.read_text()
        assert loader_for(text) is yaml.CSafeLoader, path
        assert load_yaml_document(path) == yaml.load(text, Loader=SafeNoAliasLoader), path
    # anything that may be an anchor or alias takes the strict path, which refuses aliases
    for text in ("a: &x 1\nb: *x\n", "a: [*x]\n", "a: {b: *x}\n", "- &anchor v\n"):
        assert loader_for(text) is SafeNoAliasLoader, text
    # ... also inside a string (conservative): read all the same
    path = write_meta(tmp_path, "version: 0.4.0\nnote: 'a*b & c&d'\n") / "metadata.yaml"
    assert loader_for(path.read_text()) is SafeNoAliasLoader
    assert load_yaml_document(path)["note"] == "a*b & c&d"
    # a Python tag is refused on the fast path too
    path = write_meta(tmp_path, "version: 0.4.0\nx: !!python/object/apply:os.getcwd []\n") / "metadata.yaml"
    assert loader_for(path.read_text()) is yaml.CSafeLoader
    with pytest.raises(MetadataError, match="invalid YAML"):
        load_yaml_document(path)
