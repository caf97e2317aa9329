"""The validator's judgement of each episode as the viewer shows it, from a report
(:mod:`.validation`): the list's verdict per episode (valid | warn | invalid | unchecked, the checks that
fail or warn it, its number of timed findings) and an episode's timeline markers, one per timed finding."""

from __future__ import annotations

#: timed findings shown per episode (the report keeps at most 100 per check and episode)
MAX_EPISODE_FINDINGS = 2000


def episode_verdicts(rep: dict | None, ids: list[str]) -> dict[str, dict]:
    """Per episode: ``verdict`` (valid | warn | invalid | unchecked, from the report ``rep``; None without
    one), the checks that fail or warn it, its number of timed findings."""
    if rep is None:
        return {}
    out = {i: {"verdict": "unchecked", "checks": [], "findings": 0} for i in ids}
    for ep, ok in rep["episodes"].items():
        if ep in out:
            out[ep]["verdict"] = "valid" if ok else "invalid"
    for r in rep["rows"]:
        named = r["episodes"] if r["status"] == "fail" else r["warned"] if r["status"] == "warn" else []
        if r["status"] == "fail" and not r["episodes"]:
            named = list(rep["episodes"])  # a failed check naming no episode fails them all
        for ep in named:
            if ep in out:
                out[ep]["checks"].append({"check": r["check"], "status": r["status"]})
                if r["status"] == "warn" and out[ep]["verdict"] == "valid":
                    out[ep]["verdict"] = "warn"
        seen = set()
        for f in r["findings"]:
            # one gap seen in every attribute of a stream file is one finding (as the episode page shows it)
            k = (str(f["episode"]), f.get("t_ns"), f.get("end_ns"), f.get("what"))
            if k[0] in out and k not in seen:
                seen.add(k)
                out[k[0]]["findings"] += 1
    return out


def episode_findings(rep: dict | None, ep_id: str, t0: int) -> dict:
    """One episode's verdict, the checks that fail or warn it (with their detail) and its timed findings
    (at most :data:`MAX_EPISODE_FINDINGS`, in time order) as timeline markers: times in ns from ``t0``,
    one marker per finding seen in several attributes of a stream file."""
    if rep is None:
        return {"verdict": None, "checks": [], "findings": []}
    verdict = episode_verdicts(rep, [ep_id])[ep_id]
    checks = []
    for r in rep["rows"]:
        names = r["episodes"] if r["status"] == "fail" else r["warned"] if r["status"] == "warn" else []
        if ep_id in names or (r["status"] == "fail" and not r["episodes"]):
            checks.append({"check": r["check"], "status": r["status"], "detail": r["detail"]})
    merged: dict[tuple, dict] = {}
    for r in rep["rows"]:
        for f in r["findings"]:
            if str(f["episode"]) != ep_id:
                continue
            try:
                t, end = int(f["t_ns"]), None if f.get("end_ns") is None else int(f["end_ns"])
            except (TypeError, ValueError):
                continue
            where = str(f.get("where", ""))
            k = (r["check"], t, end, str(f.get("what", "")), str(f.get("level", "fail")))
            if k in merged:  # one gap seen in every attribute of a stream file: one marker
                if where not in merged[k]["where"]:
                    merged[k]["where"].append(where)
                continue
            merged[k] = {"check": r["check"], "t_ns": t - t0, "end_ns": None if end is None else end - t0,
                         "stamp": str(t), "what": k[3], "level": k[4], "where": [where]}
    found = sorted(merged.values(), key=lambda f: (f["t_ns"], f["check"]))[:MAX_EPISODE_FINDINGS]
    for f in found:
        f["where"] = _join_where(f["where"])
    return {"verdict": verdict["verdict"], "checks": checks, "findings": found}


def _join_where(places: list[str]) -> str:
    """``obs arms/right/qpos``, ``obs arms/right/qvel`` -> ``obs arms/right (qpos, qvel)``."""
    groups: dict[str, list[str]] = {}
    for p in places:
        head, _, attr = p.rpartition("/")
        if head and " " in head:
            groups.setdefault(head, []).append(attr)
        else:
            groups.setdefault(p, [])
    return "; ".join(f"{h} ({', '.join(a)})" if len(a) > 1 else f"{h}/{a[0]}" if a else h for h, a in groups.items())
