"""http-fetch: GET one URL and return status, content type and text (skillq script protocol).

Exit 0 = success, 75 = transient (5xx, timeout, connection refused: retried), 1 = permanent.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, NoReturn

ALLOWED_SCHEMES = ("http://", "https://", "data:")
TRANSIENT = 75


def fail(message: str, code: int = 1) -> NoReturn:
    print(f"http-fetch: {message}", file=sys.stderr)
    sys.exit(code)


def load_inputs() -> dict[str, Any]:
    path = os.environ.get("SKILL_INPUTS")
    data = json.loads(Path(path).read_text(encoding="utf-8")) if path else json.load(sys.stdin)
    if not isinstance(data, dict):
        fail("the inputs JSON must be an object")
    return data


def emit(outputs: dict[str, Any]) -> None:
    text = json.dumps(outputs, ensure_ascii=False)
    target = os.environ.get("SKILL_OUTPUT")
    if target:
        Path(target).write_text(text, encoding="utf-8")
    else:
        print(text)


def main() -> int:
    inputs = load_inputs()
    url = str(inputs["url"])
    if not url.lower().startswith(ALLOWED_SCHEMES):
        fail(f"only http, https and data URLs are fetched, not {url!r}")
    timeout_s = float(inputs.get("timeout_s") or 20)
    max_bytes = int(inputs.get("max_bytes") or 1_000_000)
    # The scheme is checked above: no file: or custom scheme reaches urllib (S310).
    request = urllib.request.Request(url, headers={"User-Agent": "skillq-http-fetch/1"})  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310
            body = response.read(max_bytes + 1)
            status = response.status or 200  # a data: URL has no status
            content_type = response.headers.get("Content-Type", "") or ""
            charset = response.headers.get_content_charset() or "utf-8"
            final_url = response.geturl()
    except urllib.error.HTTPError as exc:
        code = TRANSIENT if exc.code >= 500 else 1
        fail(f"{url} answered {exc.code} {exc.reason}", code)
    except (TimeoutError, urllib.error.URLError, ConnectionError) as exc:
        reason = getattr(exc, "reason", exc)
        fail(f"cannot reach {url}: {reason}", TRANSIENT)
    emit({"url": final_url, "status": status, "content_type": content_type,
          "text": body[:max_bytes].decode(charset, errors="replace"),
          "truncated": len(body) > max_bytes})
    return 0


if __name__ == "__main__":
    sys.exit(main())
