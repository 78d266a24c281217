"""Fetch top-level comments of one YouTube video through the Data API v3 commentThreads.list.

skillq script protocol: inputs JSON at $SKILL_INPUTS (or stdin), outputs JSON to $SKILL_OUTPUT
(or the last stdout line). Exit 0 ok, 75 transient (retried), 1 permanent (message on stderr).
Quota: 1 unit per page of up to 100 threads.
"""

import json
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

API_BASE = "https://www.googleapis.com/youtube/v3/"
VIDEO_ID_RE = re.compile(r"^[A-Za-z0-9_-]{11}$")
YOUTUBE_HOSTS = {"youtube.com", "www.youtube.com", "m.youtube.com", "music.youtube.com",
                 "youtube-nocookie.com", "www.youtube-nocookie.com"}
PATH_PREFIXES = ("shorts", "embed", "live", "v", "e")
TRANSIENT_REASONS = {"rateLimitExceeded", "userRateLimitExceeded", "backendError", "internalError"}
MAX_TEXT = 1000  # characters kept per comment: keeps outputs small for the broker


class SkillError(Exception):
    def __init__(self, message: str, code: int = 1, status: int = 0, reason: str = "") -> None:
        super().__init__(message)
        self.code, self.status, self.reason = code, status, reason


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


def api_get(endpoint: str, params: dict, key: str) -> dict:
    url = API_BASE + endpoint + "?" + urllib.parse.urlencode({**params, "key": key})
    req = urllib.request.Request(url, headers={"User-Agent": "skillq-example/1"})  # noqa: S310
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310 (https only)
            return json.load(resp)
    except urllib.error.HTTPError as exc:
        try:
            err = json.load(exc).get("error", {})
        except (ValueError, AttributeError):
            err = {}
        reason = ((err.get("errors") or [{}])[0]).get("reason", "")
        detail = f"YouTube API {endpoint}: HTTP {exc.code} {reason}: {err.get('message', '')}"
        if exc.code == 429 or exc.code >= 500 or reason in TRANSIENT_REASONS:
            raise SkillError(detail, 75, exc.code, reason) from None
        if reason == "quotaExceeded":
            detail += " (daily quota is spent; it resets at midnight Pacific time)"
        elif reason in ("keyInvalid", "forbidden", "accessNotConfigured") or exc.code == 401:
            detail += " (check YOUTUBE_API_KEY and that YouTube Data API v3 is enabled)"
        raise SkillError(detail, 1, exc.code, reason) from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        raise SkillError(f"network error calling YouTube API {endpoint}: {exc}", 75) from None


def to_comment(thread: dict) -> dict:
    top = thread.get("snippet", {}).get("topLevelComment", {})
    snip = top.get("snippet", {})
    text = snip.get("textOriginal") or snip.get("textDisplay") or ""
    return {"id": top.get("id", thread.get("id", "")),
            "author": snip.get("authorDisplayName", ""),
            "text": text if len(text) <= MAX_TEXT else text[:MAX_TEXT - 1] + "…",
            "like_count": int(snip.get("likeCount", 0)),
            "reply_count": int(thread.get("snippet", {}).get("totalReplyCount", 0)),
            "published_at": snip.get("publishedAt", "")}


def fetch_comments(video_id: str, limit: int, order: str, key: str) -> tuple[list[dict], bool]:
    """Page through commentThreads until `limit` comments; returns (comments, disabled)."""
    comments: list[dict] = []
    token = ""
    while len(comments) < limit:
        params = {"part": "snippet", "videoId": video_id, "order": order,
                  "textFormat": "plainText", "maxResults": min(100, limit - len(comments)),
                  **({"pageToken": token} if token else {})}
        try:
            data = api_get("commentThreads", params, key)
        except SkillError as exc:
            if exc.reason == "commentsDisabled":
                return [], True
            if exc.reason == "videoNotFound" or exc.status == 404:
                raise SkillError(f"video not found: {video_id}") from None
            raise
        comments.extend(to_comment(t) for t in data.get("items", []))
        token = data.get("nextPageToken", "")
        if not token:
            break
    return comments[:limit], False


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
    limit = int(inputs.get("max_comments", 50))
    order = str(inputs.get("order", "relevance"))
    if not 1 <= limit <= 2000:
        raise SkillError(f"max_comments must be between 1 and 2000, got {limit}")
    if order not in ("relevance", "time"):
        raise SkillError(f"order must be 'relevance' or 'time', got {order!r}")
    key = os.environ.get("YOUTUBE_API_KEY", "").strip()
    if not key:
        raise SkillError("YOUTUBE_API_KEY is not set (the skill needs the youtube_api_key secret)")
    comments, disabled = fetch_comments(video_id, limit, order, key)
    return {"video_id": video_id, "comments": comments, "comments_disabled": disabled}


def main() -> int:
    try:
        write_outputs(run(read_inputs()))
    except SkillError as exc:
        print(f"youtube-comments: {exc}", file=sys.stderr)
        return exc.code
    except (ValueError, TypeError) as exc:  # bad video id, unreadable inputs JSON
        print(f"youtube-comments: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
