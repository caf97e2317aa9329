"""How fast is dataset-view on a big dataset? The 1,000-episode list, an episode page, a frame.

The episodes are hard links of a generated dataset's (``--source``, default: 2 episodes generated at
128x96, 5 Hz into a temporary folder), listed under ids 0..N-1 in a copied metadata.yaml
(tools/bench_info.py's construction): real files and sizes, no simulation of N episodes.

Prints medians of ``--repeat`` runs of
  * a fresh ``dataset-view DIR --port 0`` process: from its start to the URL printed (it has read
    metadata.yaml), then on that server GET /api/episodes cold (one stream footer and one folder
    listing per episode) and warm (cached), GET /api/episode/<id> (streams and camera indexes) and one
    frame;
  * in-process: ``Metadata.load`` alone (the floor) and a fresh ``ViewData`` + ``episode_list``;
  * with --browser (Chromium, tests/browser.py): from navigation to the page to N rows in the DOM, on a
    fresh server each time.
Usage: PYTHONPATH=. python tools/bench_view.py [--source DIR] [--episodes 1000] [--repeat 5] [--browser]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))


def fetch(url: str) -> tuple[float, bytes]:
    t = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as r:
        body = r.read()
    return time.perf_counter() - t, body


def server_run(big: Path, env: dict) -> dict:
    """One fresh dataset-view process: its start, then the requests a page makes."""
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "openarm_sim_dataset.cli.view", str(big), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        line = proc.stdout.readline()
        start = time.perf_counter() - t
        url = re.search(r"(http://\S+/)", line).group(1)
        cold, body = fetch(url + "api/episodes")
        rows = json.loads(body)["episodes"]
        warm, _ = fetch(url + "api/episodes")
        mid = rows[len(rows) // 2]["id"]
        page, body = fetch(url + f"api/episode/{mid}")
        ep = json.loads(body)
        frame = None
        if ep["cameras"]:
            c = ep["cameras"][0]
            frame, _ = fetch(url + f"api/frame/{mid}/{c['name']}/{c['stamps'][len(c['stamps']) // 2]}.jpeg")
        return {"start": start, "list_cold": cold, "list_warm": warm, "episode": page, "frame": frame,
                "rows": len(rows), "list_bytes": len(json.dumps(rows))}
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)


def browser_run(big: Path, n: int) -> float:
    sys.path.insert(0, str(ROOT / "tests"))
    from browser import Browser

    from openarm_sim_dataset.view import open_viewer

    server = open_viewer(big, port=0)
    server.serve_in_thread()
    b = Browser()
    try:
        b.goto("about:blank")
        t = time.perf_counter()
        b.goto(server.url + "#/")
        b.wait(f"document.body.dataset.page === 'list' && "
               f"document.querySelectorAll('#episodes tbody tr').length === {n}", timeout=60)
        return time.perf_counter() - t
    finally:
        b.close()
        server.shutdown()
        server.server_close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--source")
    ap.add_argument("--episodes", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--browser", action="store_true", help="also time the list in headless Chromium")
    a = ap.parse_args()
    from bench_info import build

    from openarm_sim_dataset.metadata import Metadata
    from openarm_sim_dataset.view.data import ViewData

    work = Path(tempfile.mkdtemp(prefix="bench_view."))
    try:
        source = Path(a.source) if a.source else work / "src"
        if not a.source:
            from openarm_sim_dataset.sim.generate import GenerateConfig, generate
            from openarm_sim_dataset.sim.recorder import RecordConfig
            from openarm_sim_dataset.sim.scene import SceneConfig

            generate(source, range(2), GenerateConfig(seed=10, scene=SceneConfig(width=128, height=96),
                                                      record=RecordConfig(camera_hz=5.0)))
        big = work / "big"
        t = time.perf_counter()
        build(source, big, a.episodes)
        print(f"built {a.episodes} hard-linked episodes in {time.perf_counter() - t:.1f} s")
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        runs, meta_t, fresh, list_t, browser = [], [], [], [], []
        for _ in range(a.repeat):
            runs.append(server_run(big, env))
            t = time.perf_counter()
            Metadata.load(big)
            meta_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            data = ViewData(big)
            t1 = time.perf_counter()
            data.episode_list()
            fresh.append(time.perf_counter() - t)
            list_t.append(time.perf_counter() - t1)
            data.close()
            if a.browser:
                browser.append(browser_run(big, a.episodes))
        med = lambda xs: statistics.median(xs) * 1e3  # noqa: E731
        r0 = runs[0]
        print(f"{a.episodes} episodes, medians of {a.repeat} (ms):")
        print(f"  dataset-view process: start to URL {med([r['start'] for r in runs]):.0f} (reads metadata.yaml)")
        print(f"  GET /api/episodes cold {med([r['list_cold'] for r in runs]):.0f}, "
              f"warm {med([r['list_warm'] for r in runs]):.1f} "
              f"({r0['rows']} rows, {r0['list_bytes'] / 1e3:.0f} kB)")
        print(f"  GET /api/episode/<id> {med([r['episode'] for r in runs]):.0f}; one frame "
              + (f"{med([r['frame'] for r in runs]):.1f}" if r0["frame"] is not None else "n/a"))
        print(f"  in-process: Metadata.load {med(meta_t):.0f} (the floor); ViewData + episode_list {med(fresh):.0f} "
              f"(the list alone {med(list_t):.0f})")
        if browser:
            print(f"  Chromium: navigation to {a.episodes} rows in the DOM {med(browser):.0f} "
                  f"(min {min(browser) * 1e3:.0f}, max {max(browser) * 1e3:.0f})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
