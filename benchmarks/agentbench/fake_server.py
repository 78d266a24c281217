"""The local model server of tests/support/fake_llm, with Nagle's algorithm off.

http.server writes a response's headers and its body in two sends; with Nagle on, the
body waits for the client's delayed ACK of the headers, about 40 ms on Linux once a
keep-alive connection leaves quick-ACK mode, on every request past the first few. Real
servers (Go's net/http under Ollama, for one) set TCP_NODELAY; a benchmark of what skillq
adds must not measure that stall on both sides.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from support.fake_llm.cli import main
from support.fake_llm.server import Handler

Handler.disable_nagle_algorithm = True

if __name__ == "__main__":
    sys.exit(main())
