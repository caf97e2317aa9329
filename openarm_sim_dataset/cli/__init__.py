"""Command-line tools: argument parsing and printing over library functions.

Exit codes: 0 success, 1 a dataset that fails validation, 2 unusable input (one line on stderr).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from ..errors import DatasetError

EXIT_OK, EXIT_INVALID, EXIT_UNUSABLE = 0, 1, 2


def run(main: Callable[[], int | None], prog: str) -> int:
    """Call ``main``; turn bad input into one line on stderr and exit code 2, never a traceback."""
    try:
        return int(main() or 0)
    except DatasetError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_UNUSABLE
    except (KeyError, IndexError, ValueError) as e:
        msg = e.args[0] if e.args else repr(e)
        print(f"{prog}: error: {msg}", file=sys.stderr)
        return EXIT_UNUSABLE
    except ImportError as e:  # a missing optional extra: the message names the pip install to run
        print(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_UNUSABLE
    except OSError as e:
        print(f"{prog}: error: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        return EXIT_UNUSABLE
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
