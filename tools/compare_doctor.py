#!/usr/bin/env python3
"""lerobot-doctor and dataset-validate side by side on the same LeRobot datasets.

    python tools/compare_doctor.py DIR [DIR ...] [--doctor PATH] [--validate PATH]
        [--label DIR=NAME] [--markdown out.md] [--our-rows] [--save-raw RAWDIR]
    python tools/compare_doctor.py --mapping      # the mapping table below, as Markdown

For every dataset folder both tools run in their own process (lerobot-doctor from its own venv:
``python3 -m venv /work/venvs/doctor && /work/venvs/doctor/bin/pip install lerobot-doctor==0.2.0``;
ours is ``dataset-validate DIR --json --no-update-metadata``, which writes nothing into the dataset).
It prints, per dataset:

* every finding of lerobot-doctor (a WARN or FAIL message; ``--all`` adds its PASS messages) with the
  rows of ours that judge the same thing and what they said (``MAPPING``), and a verdict: ``ours too``
  (one of them warned or failed), ``ours passed``, ``ours skipped``, ``no row of ours judges this``, or
  ``not judged (rows absent)`` (the mapping names rows this validator did not print); the mapping is by
  row, not by dimension or episode;
* our rows that warned or failed and that no finding of lerobot-doctor maps to (what only we found);
* with ``--our-rows``, every row of ours (status and detail), to read the passes too.

Either tool failing (no JSON, a crash, a time-out) is one line, and the other tool's findings are
still listed. Standard library only: it imports neither tool. The doctor is given an absolute path
(a relative one that does not exist would be taken for a Hugging Face repo id and downloaded) and
runs with ``HF_HUB_OFFLINE=1``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

#: lerobot-doctor's 11 check groups, in its report order (lerobot_doctor/runner.py, version 0.2.0)
DOCTOR_GROUPS = (
    "Metadata & Format Compliance", "Temporal Consistency", "Action Quality", "Video Integrity",
    "Data Distribution", "Episode Health", "Feature Consistency", "Training Readiness", "Anomaly Detection",
    "Portability", "Per-Episode Summary",
)

#: (doctor check group, regex on its message, our rows that judge the same thing, why). The first entry
#: whose group and regex match a message decides; a group's entry with regex None catches the rest.
#: An empty tuple of rows: nothing of ours judges it. Rows named here that our run did not print (another
#: version of the validator) are left out of a finding's "ours" column, so the table may name rows of
#: newer or older validators alike.
MAPPING: tuple[tuple[str, str | None, tuple[str, ...], str], ...] = (
    # any group: lerobot-doctor judged nothing (no data loaded)
    ("*", r"No episode data loaded|[Nn]o numeric columns", (), "lerobot-doctor had no data to judge"),
    # Metadata & Format Compliance: info.json, files and totals
    ("Metadata & Format Compliance", r"info\.json (not found|is not valid|could not)",
     ("lerobot_info", "metadata"), "info.json read and parsed"),
    ("Metadata & Format Compliance", r"missing required fields|fps must be positive|[Cc]odebase version|format version",
     ("lerobot_info", "metadata"), "info.json keys and version"),
    ("Metadata & Format Compliance", r"data/ directory|parquet files found|[Ee]pisode metadata",
     ("lerobot_files", "lerobot_info"), "the files info.json and the episode table name"),
    ("Metadata & Format Compliance", r"total_tasks|total_frames|total_episodes|Episode count",
     ("lerobot_info", "lerobot_indices"), "totals against the data"),
    ("Metadata & Format Compliance", r"declared in info\.json but not in data",
     ("lerobot_info", "metadata"), "features against the parquet schema"),
    ("Metadata & Format Compliance", None, ("lerobot_info", "metadata"), "info.json"),
    # Temporal Consistency
    ("Temporal Consistency", r"frame_index|[Mm]issing episode indices|[Gg]lobal index",
     ("lerobot_indices",), "episode, frame and global indices"),
    ("Temporal Consistency", r"non-monotonic|dropped frame|[Mm]ean interval|timestamps",
     ("lerobot_timestamps", "timestamps", "duplicate_rows"), "timestamps against frame_index/fps"),
    ("Temporal Consistency", None, ("lerobot_timestamps", "lerobot_indices", "timestamps"), "timing"),
    # Action Quality
    ("Action Quality", r"NaN|Inf values", ("nulls", "nonfinite_values"), "null and non-finite values"),
    ("Action Quality", r"at (minimum|maximum)|clipping", ("pinned_at_bound", "joint_limits"),
     "a dimension pinned at its extreme (doctor: > 50 % of samples warn, > 99 % fail)"),
    ("Action Quality", r"frozen|consecutive identical", ("frozen_action",),
     "runs of identical action rows (doctor: the longest run >= 5 % of an episode)"),
    ("Action Quality", r"jump", ("outliers", "qpos_jumps"), "sudden large steps"),
    ("Action Quality", r"Found action columns|No action columns", ("lerobot_info",), "which columns are actions"),
    ("Action Quality", None, (), "action quality"),
    # Video Integrity
    ("Video Integrity", r"missing", ("lerobot_files", "cameras_present"), "every video file present"),
    ("Video Integrity", r"failed to decode|not installed", ("lerobot_files", "lerobot_video_frames", "jpeg_frames"),
     "videos decode"),
    ("Video Integrity", r"fps=", ("lerobot_video_frames", "camera_rate"), "video frame rate"),
    ("Video Integrity", r"resolution", ("lerobot_video_frames", "jpeg_frames"), "frame size against info.json"),
    ("Video Integrity", r"frames, expected", ("lerobot_video_frames", "lerobot_video_ranges"),
     "frames in the file against the episodes it holds"),
    ("Video Integrity", r"video_path|template", ("lerobot_info", "lerobot_files"), "video_path template"),
    ("Video Integrity", None, ("lerobot_files", "lerobot_video_frames"), "videos"),
    # Data Distribution
    ("Data Distribution", r"NaN|Inf", ("nulls", "nonfinite_values"), "null and non-finite values"),
    ("Data Distribution", r"zero variance", ("constant_dimensions", "lerobot_zero_variance"),
     "a constant dimension (doctor: every numeric column; ours: state and action vectors)"),
    ("Data Distribution", r"outlier", ("outliers",), "values > 10 std from the mean"),
    ("Data Distribution", r"stats\.json|not in stats", ("lerobot_stats",), "meta/stats.json against the data"),
    ("Data Distribution", None, ("lerobot_stats",), "distribution"),
    # Episode Health
    ("Episode Health", r"shorter than \d+ frames|<=1 frame|empty episode", ("episode_length",), "too short to use"),
    ("Episode Health", r"length mismatch", ("lerobot_info", "lerobot_indices"), "episode lengths against metadata"),
    ("Episode Health", r"chunk_size|variance|abnormally|imbalance|Episode lengths|durations|Task distribution",
     (), "training advice on the length distribution"),
    ("Episode Health", None, ("episode_length",), "episodes"),
    # Feature Consistency
    ("Feature Consistency", None, ("lerobot_info", "metadata"), "one schema across episodes"),
    # Training Readiness
    ("Training Readiness", r"zero std", ("constant_dimensions", "lerobot_zero_variance", "lerobot_stats"),
     "a dimension normalisation divides by 0"),
    ("Training Readiness", r"stats\.json|[Nn]ormalization", ("lerobot_stats",), "normalization statistics"),
    ("Training Readiness", r"too short for delta_timestamps", ("episode_length",), "horizon longer than an episode"),
    ("Training Readiness", None, (), "policy-specific advice (ACT, Diffusion, VLA; dimensions > 20)"),
    # Anomaly Detection
    ("Anomaly Detection", r"near-duplicate", ("duplicate_episodes",),
     "repeated episodes (ours: identical content; doctor: first/last 10 action rows and length)"),
    ("Anomaly Detection", r"constant", ("constant_dimensions", "lerobot_zero_variance"),
     "constant observation dimension"),
    ("Anomaly Detection", r"stuck|static", ("stuck_zero_joint", "pinned_at_bound"),
     "a dimension unchanged in > 80 % of the frames of > 80 % of the episodes (ours: held at 0.0, or at a bound)"),
    ("Anomaly Detection", r"distribution shift", ("drift",),
     "mean of the last quarter of the episodes > 3 std from the first quarter's"),
    ("Anomaly Detection", None, (), "anomalies"),
    # Portability
    ("Portability", r"absolute path|not a template", ("lerobot_info",), "path templates"),
    ("Portability", r"unreadable|symlink|Non-parquet", ("lerobot_files",), "files"),
    ("Portability", None, (), "size and hosting"),
    # Per-Episode Summary: the same measures as above, per episode
    ("Per-Episode Summary", r"frozen", ("frozen_action",), "frozen actions, per episode"),
    ("Per-Episode Summary", r"jump", ("outliers", "qpos_jumps"), "action jumps, per episode"),
    ("Per-Episode Summary", r"dropped frame|non-monotonic", ("lerobot_timestamps", "timestamps"), "timing, per episode"),
    ("Per-Episode Summary", r"too short|single frame", ("episode_length",), "length, per episode"),
    ("Per-Episode Summary", r"NaN|Inf", ("nulls", "nonfinite_values"), "non-finite values, per episode"),
    ("Per-Episode Summary", None, (), "per-episode roll-up"),
)

SEVERITY_ORDER = {"FAIL": 0, "WARN": 1, "PASS": 2}
OUR_STATUS = {"fail": "FAIL", "warn": "warn", "pass": "pass", "skip": "skip"}


def mapping_for(group: str, message: str) -> tuple[tuple[str, ...], str]:
    """Our rows that judge what a doctor message of ``group`` says, and why (empty: none of ours)."""
    for g, pattern, rows, why in MAPPING:
        if g in (group, "*") and (pattern is None or re.search(pattern, message)):
            return rows, why
    return (), "no mapping for this group"


def _one_line(text: str, limit: int = 240) -> str:
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    line = lines[-1].strip() if lines else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def run_json(cmd: list[str], timeout: float, env: dict | None = None) -> tuple[dict | None, str]:
    """Run ``cmd``; its stdout parsed as JSON, or None and one line saying why."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except FileNotFoundError:
        return None, f"not found: {cmd[0]}"
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:.0f} s"
    try:
        data = json.loads(p.stdout)
    except json.JSONDecodeError:
        return None, f"no JSON (exit {p.returncode}): {_one_line(p.stderr) or _one_line(p.stdout) or 'no output'}"
    if not isinstance(data, dict):
        return None, f"unexpected JSON (exit {p.returncode})"
    return data, f"exit {p.returncode}"


def run_doctor(doctor: str, path: Path, timeout: float, max_episodes: int | None) -> tuple[dict | None, str]:
    cmd = [doctor, "check", str(path.resolve()), "--json"]
    if max_episodes:
        cmd += ["--max-episodes", str(max_episodes)]
    env = dict(os.environ, HF_HUB_OFFLINE="1")  # a local folder only: never the Hub
    return run_json(cmd, timeout, env)


def run_ours(validate: str, path: Path, timeout: float, extra: list[str]) -> tuple[dict | None, str]:
    return run_json([validate, str(path), "--json", "--no-update-metadata", *extra], timeout)


def compare(doctor: dict | None, ours: dict | None, include_pass: bool = False, collapse: bool = True) -> dict:
    """The side-by-side view of one dataset: doctor findings with our covering rows, our rows it has not.
    ``collapse``: messages that differ only in their numbers (one per dimension or episode) and that map
    to the same rows with the same statuses become one finding, ``count`` of them, the first one shown."""
    our_rows = {r["check"]: r for r in (ours or {}).get("rows", [])}
    findings = []
    covered: set[str] = set()
    for check in (doctor or {}).get("checks", []):
        for m in check.get("messages", []):
            if m["severity"] == "PASS" and not include_pass:
                continue
            rows, why = mapping_for(check["name"], m["message"])
            present = [r for r in rows if r in our_rows]
            if m["severity"] != "PASS":
                covered.update(present)
            ours_said = [(r, our_rows[r].get("status", "?"), our_rows[r].get("detail", "")) for r in present]
            statuses = {s for _, s, _ in ours_said}
            if ours is None:
                verdict = "ours did not run"
            elif m["severity"] == "PASS":
                verdict = ""
            elif not rows:
                verdict = "no row of ours judges this"
            elif not present:
                verdict = "not judged (rows absent)"
            elif statuses & {"fail", "warn"}:
                verdict = "ours too"
            elif "pass" in statuses:
                verdict = "ours passed"
            else:
                verdict = "ours skipped"
            findings.append({"group": check["name"], "severity": m["severity"], "message": m["message"],
                             "ours": ours_said, "why": why, "verdict": verdict})
    findings.sort(key=lambda f: SEVERITY_ORDER.get(f["severity"], 3))
    if collapse:
        findings = _collapse(findings)
    only_ours = [r for name, r in our_rows.items() if r.get("status") in ("fail", "warn") and name not in covered]
    return {"findings": findings, "only_ours": only_ours, "rows": list(our_rows.values())}


def _collapse(findings: list[dict]) -> list[dict]:
    out: list[dict] = []
    index: dict[tuple, dict] = {}
    for f in findings:
        shape = re.sub(r"-?\d+(\.\d+)?", "#", f["message"])
        key = (f["severity"], f["group"], shape, tuple((r, s) for r, s, _ in f["ours"]), f["verdict"])
        if key in index:
            index[key]["count"] += 1
            continue
        index[key] = dict(f, count=1)
        out.append(index[key])
    return out


def _summary_doctor(d: dict | None, why: str) -> str:
    if d is None:
        return f"lerobot-doctor failed: {why}"
    s = d.get("summary", {})
    return (f"lerobot-doctor {d.get('version', '?')}: {d.get('overall_severity')} "
            f"({s.get('PASS', 0)} pass, {s.get('WARN', 0)} warn, {s.get('FAIL', 0)} fail of "
            f"{len(d.get('checks', []))} groups)")


def _summary_ours(o: dict | None, why: str) -> str:
    if o is None:
        return f"dataset-validate failed: {why}"
    c = o.get("checks", {})
    return (f"dataset-validate: valid {str(o.get('valid')).lower()} ({c.get('passed', 0)} passed, "
            f"{c.get('warned', 0)} warned, {c.get('failed', 0)} failed, {c.get('skipped', 0)} skipped)")


def _short(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def print_text(label: str, path: Path, d, dwhy, o, owhy, view: dict, our_rows: bool) -> None:
    print(f"== {label}" + (f"  ({path})" if label != str(path) else ""))
    print("   " + _summary_doctor(d, dwhy))
    print("   " + _summary_ours(o, owhy))
    if d is not None:
        print(f"   lerobot-doctor findings ({len(view['findings'])}):")
        for f in view["findings"]:
            ours = ", ".join(f"{r} {OUR_STATUS.get(s, s)}" for r, s, _ in f["ours"]) or "-"
            more = f" (and {f['count'] - 1} alike)" if f.get("count", 1) > 1 else ""
            print(f"     {f['severity']:<4} {f['group']}: {_short(f['message'], 150)}{more}")
            print(f"          ours: {ours}  [{f['verdict']}]")
    if o is not None:
        print(f"   ours only ({len(view['only_ours'])}):")
        for r in view["only_ours"]:
            print(f"     {OUR_STATUS.get(r['status'], r['status']):<4} {r['check']}: {_short(r.get('detail', ''), 150)}")
        if our_rows:
            print("   every row of ours:")
            for r in view["rows"]:
                print(f"     {OUR_STATUS.get(r['status'], r['status']):<4} {r['check']}: {_short(r.get('detail', ''), 150)}")
    print()


def _md(text: str, limit: int = 300) -> str:
    return _short(text, limit).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def markdown(results: list[tuple], our_rows: bool) -> str:
    out = ["# lerobot-doctor and dataset-validate, side by side", ""]
    for label, _path, d, dwhy, o, owhy, view in results:
        out += [f"## {label}", "", f"- {_summary_doctor(d, dwhy)}", f"- {_summary_ours(o, owhy)}", ""]
        if d is not None:
            out += ["| doctor | group | finding | our rows (status) | |", "|---|---|---|---|---|"]
            for f in view["findings"]:
                ours = ", ".join(f"`{r}` {OUR_STATUS.get(s, s)}" for r, s, _ in f["ours"]) or "-"
                more = f" (x{f['count']})" if f.get("count", 1) > 1 else ""
                out.append(f"| {f['severity']} | {f['group']} | {_md(f['message'])}{more} | {ours} | {f['verdict']} |")
            if not view["findings"]:
                out.append("| | | no finding | | |")
            out.append("")
        if o is not None:
            out += ["Ours only (warned or failed, no doctor finding maps to it):", ""]
            if view["only_ours"]:
                out += ["| ours | row | detail |", "|---|---|---|"]
                out += [f"| {OUR_STATUS.get(r['status'], r['status'])} | `{r['check']}` | {_md(r.get('detail', ''))} |"
                        for r in view["only_ours"]]
            else:
                out.append("none")
            out.append("")
            if our_rows:
                out += ["??? note \"Every row of dataset-validate\"", "", "    | ours | row | detail |",
                        "    |---|---|---|"]
                out += [f"    | {OUR_STATUS.get(r['status'], r['status'])} | `{r['check']}` | {_md(r.get('detail', ''))} |"
                        for r in view["rows"]]
                out.append("")
    return "\n".join(out) + "\n"


def mapping_markdown() -> str:
    out = ["| lerobot-doctor group | message matching | our rows | what |", "|---|---|---|---|"]
    for g, pattern, rows, why in MAPPING:
        pat = pattern.replace("|", " or ").replace("\\", "") if pattern else "(any other)"
        out.append(f"| {g} | {pat} | {', '.join(f'`{r}`' for r in rows) or 'none'} | {why} |")
    return "\n".join(out) + "\n"


def _default_validate() -> str:
    found = shutil.which("dataset-validate")
    if found:
        return found
    beside = Path(sys.executable).parent / "dataset-validate"
    return str(beside) if beside.exists() else "dataset-validate"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("datasets", nargs="*", type=Path, metavar="DIR")
    p.add_argument("--doctor", default="/work/venvs/doctor/bin/lerobot-doctor",
                   help="the lerobot-doctor executable (its own venv)")
    p.add_argument("--validate", default=_default_validate(), help="the dataset-validate executable")
    p.add_argument("--validate-args", default="", help="more arguments for dataset-validate (one string)")
    p.add_argument("--max-episodes", type=int, default=None, help="passed to lerobot-doctor")
    p.add_argument("--timeout", type=float, default=1800.0, help="s per tool and dataset")
    p.add_argument("--label", action="append", default=[], metavar="DIR=NAME",
                   help="name a dataset (e.g. by its public repository and path) in the output")
    p.add_argument("--markdown", type=Path, help="also write the comparison as Markdown to this file")
    p.add_argument("--all", action="store_true", help="list lerobot-doctor's PASS messages too")
    p.add_argument("--no-collapse", action="store_true",
                   help="list every message of lerobot-doctor (default: messages that differ only in their "
                        "numbers and map alike are one line, with their count)")
    p.add_argument("--our-rows", action="store_true", help="list every row of ours, passes included")
    p.add_argument("--save-raw", type=Path, metavar="RAWDIR", help="keep both tools' JSON output here")
    p.add_argument("--mapping", action="store_true", help="print the mapping table as Markdown and exit")
    a = p.parse_args(argv)
    if a.mapping:
        sys.stdout.write(mapping_markdown())
        return 0
    if not a.datasets:
        p.error("no dataset folder given")
    labels = {}
    for item in a.label:
        k, _, v = item.partition("=")
        labels[str(Path(k).resolve())] = v
    extra = a.validate_args.split()
    results = []
    for path in a.datasets:
        label = labels.get(str(path.resolve()), str(path))
        if not path.is_dir():
            print(f"== {label}: not a folder, skipped\n")
            continue
        d, dwhy = run_doctor(a.doctor, path, a.timeout, a.max_episodes)
        o, owhy = run_ours(a.validate, path, a.timeout, extra)
        if a.save_raw:
            a.save_raw.mkdir(parents=True, exist_ok=True)
            stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", label).strip("_") or "dataset"
            for tool, data, why in (("doctor", d, dwhy), ("ours", o, owhy)):
                (a.save_raw / f"{stem}.{tool}.json").write_text(json.dumps(data if data is not None else {"error": why}, indent=1))
        view = compare(d, o, include_pass=a.all, collapse=not a.no_collapse)
        print_text(label, path, d, dwhy, o, owhy, view, a.our_rows)
        results.append((label, path, d, dwhy, o, owhy, view))
    if a.markdown:
        a.markdown.write_text(markdown(results, a.our_rows))
        print(f"wrote {a.markdown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
