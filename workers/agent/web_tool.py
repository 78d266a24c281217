"""``fetch_page``: a build's planner reads a web page or an API's documentation, to look
for an API before it plans a browser step (the approach hierarchy). Offered only where
the deployment allows it (SKILLQ_BUILD_WEB_ACCESS, off by default): a worker that
fetches what a model asks for reaches whatever its network reaches.

The answer is the page's status, its type and its text (an HTML page's visible text,
without its scripts and styles), cut to a size a prompt can hold; a failure is the
answer too, never a failed step."""

from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser
from types import MappingProxyType
from typing import Any

from pydantic_ai import Tool

MAX_TEXT_CHARS = 20_000
SCHEMA = MappingProxyType({
    "type": "object", "additionalProperties": False, "required": ["url"],
    "properties": {"url": {"type": "string", "description": "An http or https URL."}}})
DESCRIPTION = ("Fetch a web page or an API's documentation: its status, type and text. "
               "Look for an official API before planning a browser step.")


class _Text(HTMLParser):
    SKIPPED = frozenset({"script", "style", "noscript", "svg"})

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self._skipping += tag in self.SKIPPED

    def handle_endtag(self, tag: str) -> None:
        self._skipping -= tag in self.SKIPPED and self._skipping > 0

    def handle_data(self, data: str) -> None:
        if not self._skipping and data.strip():
            self.parts.append(data.strip())


def page_text(body: str, content_type: str) -> str:
    if "html" not in content_type:
        return body
    parser = _Text()
    parser.feed(body)
    return "\n".join(parser.parts)


@dataclass
class WebFetch:
    timeout_s: float
    max_bytes: int

    def fetch_page(self, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            return f"error: '{url}' is not an http or https URL"
        # the scheme is checked above: no file: or custom scheme reaches urlopen
        request = urllib.request.Request(url, headers={"User-Agent": "skillq-planner"})  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:  # noqa: S310
                status, kind = response.status, response.headers.get_content_type()
                charset = response.headers.get_content_charset() or "utf-8"
                raw = response.read(self.max_bytes + 1)
        except urllib.error.HTTPError as exc:
            return f"error: {url} answered HTTP {exc.code} {exc.reason}"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            return f"error: {url} could not be fetched: {getattr(exc, 'reason', exc)}"
        cut = " (cut at the size limit)" if len(raw) > self.max_bytes else ""
        text = page_text(raw[:self.max_bytes].decode(charset, "replace"), kind)
        more = f"\n[... {len(text) - MAX_TEXT_CHARS} more characters]" \
            if len(text) > MAX_TEXT_CHARS else ""
        return f"HTTP {status} {kind}{cut}\n\n{text[:MAX_TEXT_CHARS]}{more}"

    def tool(self) -> Tool[None]:
        return Tool.from_schema(self.fetch_page, name="fetch_page", description=DESCRIPTION,
                                json_schema=dict(SCHEMA))
