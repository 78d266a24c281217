"""List a YouTube channel's recent uploads through the YouTube Data API v3 (1 quota unit/call).

skillq script protocol: inputs JSON at $SKILL_INPUTS (or stdin), outputs JSON to $SKILL_OUTPUT
(or the last stdout line). Exit 0 ok, 75 transient (retried), 1 permanent (message on stderr).
"""

import json
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

API_BASE = "https://www.googleapis.com/youtube/v3/"
YOUTUBE_HOSTS = {"youtube.com", "www.youtube.com", "m.youtube.com", "music.youtube.com"}
CHANNEL_ID_RE = re.compile(r"^UC[A-Za-z0-9_-]{22}$")
HANDLE_RE = re.compile(r"^@[\w.\-]{3,30}$")
NAME_RE = re.compile(r"^[\w.\-]{1,100}$")
DURATION_RE = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$")
TRANSIENT_REASONS = {"rateLimitExceeded", "userRateLimitExceeded", "backendError", "internalError"}
STAT_FIELDS = (("view_count", "viewCount"), ("like_count", "likeCount"),
               ("comment_count", "commentCount"))
MAX_PAGES = 20  # 20 pages x 50 items: enough for any sane lookback window


class SkillError(Exception):
    def __init__(self, message: str, code: int = 1, status: int = 0) -> None:
        super().__init__(message)
        self.code, self.status = code, status


def parse_channel_url(url: str) -> tuple[str, str]:
    """(kind, value): ('id', 'UC...'), ('handle', '@name'), ('username', n) or ('custom', n)."""
    text = (url or "").strip()
    if CHANNEL_ID_RE.match(text):
        return "id", text
    if HANDLE_RE.match(text):
        return "handle", text
    if "://" not in text:
        text = "https://" + text
    parts = urllib.parse.urlsplit(text)
    if (parts.hostname or "").lower() not in YOUTUBE_HOSTS:
        raise ValueError(f"not a YouTube channel URL: {url!r}")
    segs = [urllib.parse.unquote(s) for s in parts.path.split("/") if s]
    if segs and HANDLE_RE.match(segs[0]):
        return "handle", segs[0]
    if len(segs) >= 2 and segs[0] == "channel" and CHANNEL_ID_RE.match(segs[1]):
        return "id", segs[1]
    if len(segs) >= 2 and segs[0] in ("user", "c") and NAME_RE.match(segs[1]):
        return ("username" if segs[0] == "user" else "custom"), segs[1]
    raise ValueError(f"not a YouTube channel URL (expected /@handle, /channel/UC..., /user/NAME "
                     f"or /c/NAME): {url!r}")


def to_datetime(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def parse_iso_duration(value: str) -> int:
    """'PT1H2M3S' -> 3723 seconds; 'P0D' (live/upcoming) -> 0."""
    m = DURATION_RE.match(value or "")
    d, h, mi, s = (int(g or 0) for g in m.groups()) if m else (0, 0, 0, 0)
    return ((d * 24 + h) * 60 + mi) * 60 + s


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
            raise SkillError(detail, 75, exc.code) from None
        if reason == "quotaExceeded":
            detail += " (daily quota is spent; it resets at midnight Pacific time)"
        elif reason in ("keyInvalid", "forbidden", "accessNotConfigured") or exc.code == 401:
            detail += " (check YOUTUBE_API_KEY and that YouTube Data API v3 is enabled)"
        raise SkillError(detail, 1, exc.code) from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        raise SkillError(f"network error calling YouTube API {endpoint}: {exc}", 75) from None


def resolve_channel(kind: str, value: str, key: str) -> dict:
    lookups = {"id": [("id", value)], "handle": [("forHandle", value)],
               "username": [("forUsername", value)],
               "custom": [("forHandle", "@" + value), ("forUsername", value)]}[kind]
    for param, val in lookups:
        data = api_get("channels", {"part": "snippet,contentDetails", param: val}, key)
        if data.get("items"):
            return data["items"][0]
    raise SkillError(f"channel not found: {kind} {value!r}")


def list_uploads(playlist_id: str, cutoff: datetime, limit: int, key: str) -> list[dict]:
    videos: list[dict] = []
    token = ""
    for _ in range(MAX_PAGES):
        params = {"part": "snippet,contentDetails", "playlistId": playlist_id, "maxResults": 50,
                  **({"pageToken": token} if token else {})}
        try:
            data = api_get("playlistItems", params, key)
        except SkillError as exc:
            if exc.status == 404:  # playlistNotFound: the channel has no public uploads
                return videos
            raise
        any_recent = False
        for item in data.get("items", []):
            snip, details = item.get("snippet", {}), item.get("contentDetails", {})
            published = details.get("videoPublishedAt")  # absent for private/deleted entries
            vid = details.get("videoId")
            if not vid or not published or to_datetime(published) < cutoff:
                continue
            any_recent = True
            videos.append({"id": vid, "url": f"https://www.youtube.com/watch?v={vid}",
                           "title": snip.get("title", ""), "published_at": published,
                           "channel_id": snip.get("channelId", ""),
                           "channel_title": snip.get("channelTitle", ""),
                           "description": (snip.get("description") or "")[:500]})
        token = data.get("nextPageToken")
        # Uploads come newest first: a page with nothing recent means the window is done.
        if not token or not any_recent or len(videos) >= limit:
            break
    videos.sort(key=lambda v: v["published_at"], reverse=True)
    return videos[:limit]


def add_stats(videos: list[dict], key: str) -> None:
    by_id = {v["id"]: v for v in videos}
    ids = list(by_id)  # videos.list takes up to 50 ids per call
    for start in range(0, len(ids), 50):
        data = api_get("videos", {"part": "statistics,contentDetails",
                                  "id": ",".join(ids[start:start + 50])}, key)
        for item in data.get("items", []):
            stats, video = item.get("statistics", {}), by_id.get(item.get("id"), {})
            video["duration_seconds"] = parse_iso_duration(
                item.get("contentDetails", {}).get("duration", ""))
            for field, api_field in STAT_FIELDS:
                video[field] = int(stats[api_field]) if api_field in stats else None


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
    kind, value = parse_channel_url(str(inputs.get("channel_url", "")))  # ValueError -> exit 1
    since_days = float(inputs.get("since_days", 7))
    limit = int(inputs.get("max_videos", 25))
    if since_days <= 0 or limit < 1:
        raise SkillError("since_days must be > 0 and max_videos >= 1")
    key = os.environ.get("YOUTUBE_API_KEY", "").strip()
    if not key:
        raise SkillError("YOUTUBE_API_KEY is not set (the skill needs the youtube_api_key secret)")
    channel = resolve_channel(kind, value, key)
    uploads = channel.get("contentDetails", {}).get("relatedPlaylists", {}).get("uploads", "")
    cutoff = datetime.now(UTC) - timedelta(days=since_days)
    videos = list_uploads(uploads, cutoff, limit, key) if uploads else []
    if videos:
        add_stats(videos, key)
    return {"videos": videos, "channel_id": channel.get("id", ""),
            "channel_title": channel.get("snippet", {}).get("title", "")}


def main() -> int:
    try:
        write_outputs(run(read_inputs()))
    except SkillError as exc:
        print(f"youtube-channel-videos: {exc}", file=sys.stderr)
        return exc.code
    except (ValueError, TypeError) as exc:  # bad URL, unreadable inputs JSON, non-numeric days
        print(f"youtube-channel-videos: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
