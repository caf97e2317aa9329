"""dataset-view DIR [--port P]: look at a dataset in a browser, with the validator's findings on the timeline.

Serves a local web page (standard library HTTP server, bound to 127.0.0.1; the page's scripts ship with
the package, nothing is fetched from the internet) and prints its URL; Ctrl-C stops it. The page lists
the episodes (task, prompt, success/outcome, duration, cameras, validation verdict); an episode's page
scrubs the cameras' frames in step with the joint plots (qpos with the command, qvel) by one slider or
by clicking a plot, with every timed finding of dataset-validate (a gap, a jump, a frozen run, a frame
out of place) as a marker on the timeline: click one to jump there.

The verdicts come from a saved `dataset-validate DIR --json` report (--report FILE), from a run the
viewer starts (--validate, or the page's button: `dataset-validate DIR --json --no-update-metadata`,
so the dataset is never written), or else from the `valid` flags of metadata.yaml. Reads lazily: the
list reads one timestamp column per episode, an episode's streams and frames when it is opened.
Exit 0 when stopped, 2 on unusable input (one line: no dataset, a bad report, a port in use).
"""

from __future__ import annotations

import argparse
import sys

from openarm_sim_dataset.core.errors import DatasetError

from . import Parser, run


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="dataset-view", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", help="dataset folder (any OpenArm layout)")
    p.add_argument("--port", type=int, default=8765, help="TCP port (default 8765; 0: any free port)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1, this machine only; another address exposes the "
                        "dataset to the network)")
    p.add_argument("--report", metavar="FILE", help="a saved `dataset-validate DIR --json` report to show")
    p.add_argument("--validate", action="store_true",
                   help="run dataset-validate DIR --json --no-update-metadata now (in the background)")
    p.add_argument("--quick", action="store_true", help="with --validate (and the page's button): only the form "
                                                        "and integrity checks (gaps and jumps, no camera content)")
    p.add_argument("--no-simulation", action="store_true",
                   help="with --validate (and the page's button): skip the simulation checks (replay, rendering)")
    p.add_argument("--open", action="store_true", help="open the page in the default browser")
    p.add_argument("-v", "--verbose", action="store_true", help="log every request on stderr")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error(f"argument --port: {args.port} is not a TCP port (0-65535)")
    if args.report and args.validate:
        parser.error("--report and --validate: show a saved report or run one, not both")

    def body() -> int:
        from openarm_sim_dataset.explore.view import open_viewer  # start-up: not for --help

        extra = (["--quick"] if args.quick else []) + (["--no-simulation"] if args.no_simulation else [])
        try:
            server = open_viewer(args.dataset, args.host, args.port, report=args.report, validate=args.validate,
                                 validation_args=extra, verbose=args.verbose)
        except OSError as e:
            if e.filename is None:  # the socket: a port in use, an address not of this machine
                raise DatasetError(None, f"cannot listen on {args.host}:{args.port} ({e.strerror or e}); "
                                         "--port P picks another port, --port 0 any free one") from None
            raise
        n = server.data.dataset().meta.num_episodes
        where = "" if server.loopback else " (reachable from the network: no authentication)"
        print(f"dataset-view: {args.dataset} ({n} episode{'s' if n != 1 else ''}) at {server.url}{where}", flush=True)
        print("dataset-view: Ctrl-C to stop", file=sys.stderr, flush=True)
        import signal

        def _stop(*_):
            raise KeyboardInterrupt

        signal.signal(signal.SIGTERM, _stop)  # a killed viewer stops its validation run too
        signal.signal(signal.SIGINT, _stop)  # Ctrl-C stops it even when started with SIGINT ignored
        if args.open:
            import webbrowser

            webbrowser.open(server.url)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            print("dataset-view: stopped", file=sys.stderr)
        finally:
            server.server_close()
        return 0

    return run(body, "dataset-view")


if __name__ == "__main__":
    sys.exit(main())
