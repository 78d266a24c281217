"""``python tests/support/fake_llm --port N --script FILE``: the fake LLM as a process.

FILE is JSON, ``{"key": [turn, ...], ...}``. The first line on stdout is
``fake-llm listening on http://127.0.0.1:N`` (with ``--port 0``, N is a free port). Runs
until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path

from .script import Script
from .server import FakeLLMServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fake_llm", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    parser.add_argument("--script", type=Path, help='JSON: {"key": [turn, ...]}')
    parser.add_argument("--verbose", action="store_true", help="log each request to stderr")
    args = parser.parse_args(argv)

    script = Script(json.loads(args.script.read_text()) if args.script else None)
    server = FakeLLMServer(args.host, args.port, script, verbose=args.verbose)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    server.start_in_thread()
    print(f"fake-llm listening on {server.url}", flush=True)
    stop.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
