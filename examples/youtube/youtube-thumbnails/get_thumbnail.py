"""Download the best available thumbnail of one YouTube video and report its size.

With YOUTUBE_API_KEY: videos.list?part=snippet (1 quota unit) names every thumbnail size and
the largest is taken. Without it: i.ytimg.com/vi/ID/maxresdefault.jpg, then hqdefault.jpg.
skillq script protocol: inputs JSON at $SKILL_INPUTS (or stdin), outputs JSON to $SKILL_OUTPUT
(or the last stdout line). Exit 0 ok, 75 transient (retried), 1 permanent (message on stderr).
"""

import json
import os
import re
import struct
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

API_BASE = "https://www.googleapis.com/youtube/v3/"
IMG_BASE = "https://i.ytimg.com/vi/"
VIDEO_ID_RE = re.compile(r"^[A-Za-z0-9_-]{11}$")
YOUTUBE_HOSTS = {"youtube.com", "www.youtube.com", "m.youtube.com", "music.youtube.com",
                 "youtube-nocookie.com", "www.youtube-nocookie.com"}
PATH_PREFIXES = ("shorts", "embed", "live", "v", "e")
PLACEHOLDER = (120, 90)  # the grey "no thumbnail" image i.ytimg.com may serve


class SkillError(Exception):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def parse_video_id(value: str) -> str:
    """A bare 11-character id or any common YouTube video URL shape -> the video id."""
    text = (value or "").strip()
    if VIDEO_ID_RE.match(text):
        return text
    if "://" not in text:
        text = "https://" + text
    parts = urllib.parse.urlsplit(text)
    host = (parts.hostname or "").lower()
    segs = [s for s in parts.path.split("/") if s]
    candidate = ""
    if host in ("youtu.be", "www.youtu.be") and segs:
        candidate = segs[0]
    elif host in YOUTUBE_HOSTS:
        if segs[:1] == ["watch"]:
            candidate = (urllib.parse.parse_qs(parts.query).get("v") or [""])[0]
        elif len(segs) >= 2 and segs[0] in PATH_PREFIXES:
            candidate = segs[1]
    if VIDEO_ID_RE.match(candidate):
        return candidate
    raise ValueError(f"not a YouTube video id or URL: {value!r}")


def image_size(data: bytes) -> tuple[str, int, int]:
    """(format, width, height) of PNG or JPEG bytes, read from the headers only."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        return "png", width, height
    if data[:2] == b"\xff\xd8":
        i = 2
        while i + 4 <= len(data):
            if data[i] != 0xFF:
                raise ValueError("corrupt JPEG: marker expected")
            marker = data[i + 1]
            if marker == 0xFF:  # fill byte
                i += 1
                continue
            if marker in (0x01, 0xD8) or 0xD0 <= marker <= 0xD7:  # markers without a length
                i += 2
                continue
            (length,) = struct.unpack(">H", data[i + 2:i + 4])
            # SOF0..SOF15 carry the frame size; C4 (DHT), C8 (JPG), CC (DAC) do not.
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                if i + 9 > len(data):
                    break
                height, width = struct.unpack(">HH", data[i + 5:i + 9])
                return "jpeg", width, height
            i += 2 + length
        raise ValueError("JPEG without a frame header (SOF)")
    raise ValueError("not a PNG or JPEG image")


def http_get(url: str) -> bytes | None:
    """Body of url; None on 404; SkillError 75 on throttling, server errors and timeouts."""
    req = urllib.request.Request(url, headers={"User-Agent": "skillq-example/1"})  # noqa: S310
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310 (https only)
            return resp.read()
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        transient = exc.code == 429 or exc.code >= 500
        where = url.split("?")[0]  # never print the API key
        raise SkillError(f"HTTP {exc.code} from {where}", 75 if transient else 1) from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        raise SkillError(f"network error fetching {url.split('?')[0]}: {exc}", 75) from None


def candidate_urls(video_id: str, key: str) -> list[str]:
    fallback = [f"{IMG_BASE}{video_id}/maxresdefault.jpg", f"{IMG_BASE}{video_id}/hqdefault.jpg"]
    if not key:
        return fallback
    query = urllib.parse.urlencode({"part": "snippet", "id": video_id, "key": key})
    try:
        body = http_get(f"{API_BASE}videos?{query}")
    except SkillError as exc:
        if exc.code == 75:
            raise
        # A rejected key or a spent quota must not block a public image: use the CDN.
        print(f"youtube-thumbnails: warning: {exc}; falling back to i.ytimg.com", file=sys.stderr)
        return fallback
    items = json.loads(body or b"{}").get("items") or []
    if not items:
        raise SkillError(f"video not found: {video_id}")
    thumbs = items[0].get("snippet", {}).get("thumbnails", {}).values()
    best = sorted(thumbs, key=lambda t: t.get("width", 0) * t.get("height", 0), reverse=True)
    urls = [t["url"] for t in best if str(t.get("url", "")).startswith("https://")]
    return urls[:2] or fallback


def read_inputs() -> dict:
    path = os.environ.get("SKILL_INPUTS")
    raw = Path(path).read_text(encoding="utf-8") if path else sys.stdin.read()
    return json.loads(raw) if raw.strip() else {}


def write_outputs(outputs: dict) -> None:
    text = json.dumps(outputs, ensure_ascii=False)
    if os.environ.get("SKILL_OUTPUT"):
        Path(os.environ["SKILL_OUTPUT"]).write_text(text, encoding="utf-8")
    else:
        print(text)


def run(inputs: dict) -> dict:
    video_id = parse_video_id(str(inputs.get("video_id", "")))  # ValueError -> exit 1
    out_dir = Path(inputs.get("output_dir") or Path(tempfile.gettempdir()) / "skillq-thumbnails")
    for url in candidate_urls(video_id, os.environ.get("YOUTUBE_API_KEY", "").strip()):
        data = http_get(url)
        if not data:
            continue
        fmt, width, height = image_size(data)
        if (width, height) == PLACEHOLDER and not url.endswith("/default.jpg"):
            continue  # the placeholder standing in for a missing size
        out_dir.mkdir(parents=True, exist_ok=True)
        path = (out_dir / f"{video_id}.{'png' if fmt == 'png' else 'jpg'}").resolve()
        path.write_bytes(data)
        return {"video_id": video_id, "thumbnail_url": url, "width": width, "height": height,
                "bytes": len(data), "path": str(path)}
    raise SkillError(f"no thumbnail found for video {video_id} (does the video exist?)")


def main() -> int:
    try:
        write_outputs(run(read_inputs()))
    except SkillError as exc:
        print(f"youtube-thumbnails: {exc}", file=sys.stderr)
        return exc.code
    except (ValueError, TypeError, OSError) as exc:  # bad id, bad image, unwritable output_dir
        print(f"youtube-thumbnails: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
