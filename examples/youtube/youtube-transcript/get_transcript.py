"""Extract a YouTube video's transcript with yt-dlp (no API key, no quota).

`yt-dlp --print duration ...` lists the caption tracks (manual preferred over auto), then
`--write-subs --write-auto-subs --sub-format vtt` fetches one; the WebVTT is cleaned here.
Script protocol: inputs JSON at $SKILL_INPUTS (or stdin), outputs JSON to $SKILL_OUTPUT
(or the last stdout line). Exit 0 ok, 75 transient (retried), 1 permanent (message on stderr).
"""

import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.parse
from pathlib import Path

VIDEO_ID_RE = re.compile(r"^[A-Za-z0-9_-]{11}$")
YOUTUBE_HOSTS = {"youtube.com", "www.youtube.com", "m.youtube.com", "music.youtube.com",
                 "youtube-nocookie.com", "www.youtube-nocookie.com"}
PATH_PREFIXES = ("shorts", "embed", "live", "v", "e")
LANG_RE = re.compile(r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$")
TS = r"(?:(\d+):)?(\d{1,2}):(\d{2})[.,](\d{3})"
TIMING_RE = re.compile(rf"^\s*{TS}\s+-->\s+{TS}")
TAG_RE = re.compile(r"<[^>]*>")  # <c>, </c>, <00:00:01.520>, <v Speaker>, <i>
MARKER_RE = re.compile(r"\[[^\]]*\]|♪+|>>")  # [Music] [Applause] ♪ and >> speaker changes
TRANSIENT_RE = re.compile(r"HTTP Error (429|5\d\d)|timed? ?out|Temporary failure|Connection (reset"
                          r"|refused|aborted)|Remote end closed|IncompleteRead|unreachable", re.I)


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
    raise ValueError(f"not a YouTube video URL: {value!r}")


def choose_track(manual: list[str], auto: list[str], language: str) -> tuple[str, str] | None:
    """Best caption track for `language`: any manual track before any auto-generated one."""
    lang = language.lower()
    base = lang.split("-")[0]
    for keys, source, wants in ((manual, "manual", (lang, base)),
                                (auto, "auto-generated", (lang, f"{lang}-orig", base))):
        lowered = {k.lower(): k for k in keys}
        hits = [lowered[want] for want in wants if want in lowered]
        hits += sorted(k for k in keys if k.lower().startswith(base + "-"))  # en-US, en-orig
        if hits:
            return hits[0], source
    return None


def parse_print_output(stdout: str) -> tuple[float, list[str], list[str]]:
    """The three --print lines -> (duration_seconds, manual languages, auto languages)."""
    lines = [ln.strip() for ln in stdout.strip().splitlines()[-3:]]
    if len(lines) < 3:
        raise SkillError(f"unexpected yt-dlp output: {stdout[-300:]!r}")
    # duration is "NA" for live streams; a track map is "NA" or "null" when there is none
    duration = float(lines[0]) if re.fullmatch(r"\d+(\.\d+)?", lines[0]) else 0.0
    manual, auto = (sorted(json.loads(ln)) if ln.startswith("{") else [] for ln in lines[1:])
    return duration, manual, auto


def classify_error(stderr: str) -> tuple[int, str]:
    """(exit code, message) for a failed yt-dlp run: 75 when retrying can help."""
    errors = [ln for ln in stderr.splitlines() if ln.startswith("ERROR")]
    message = (errors[-1] if errors else (stderr.strip().splitlines() or ["no output"])[-1])
    return (75 if TRANSIENT_RE.search("\n".join(errors) or stderr) else 1), message[:500]


def clean_line(line: str) -> str:
    text = html.unescape(TAG_RE.sub("", line))
    return " ".join(MARKER_RE.sub(" ", text).split())


def parse_vtt(text: str) -> list[tuple[float, str]]:
    """WebVTT -> [(start_seconds, line)], without repeats of YouTube's rolling captions."""
    rolling = bool(re.search(r"<\d{2}:\d{2}[:.]|<c[ .>]", text))  # word-timed auto captions
    cues: list[tuple[float, str]] = []
    for block in re.split(r"\n\s*\n", text.replace("\r\n", "\n").replace("\r", "\n")):
        lines = block.split("\n")
        timing = next((i for i, ln in enumerate(lines) if TIMING_RE.match(ln)), None)
        if timing is None:  # WEBVTT header, NOTE, STYLE, REGION blocks
            continue
        h, m, sec, ms = (int(g or 0) for g in TIMING_RE.match(lines[timing]).groups()[:4])
        start = h * 3600 + m * 60 + sec + ms / 1000
        for raw in lines[timing + 1:]:
            line = clean_line(raw)
            if not line or (cues and line == cues[-1][1]):
                continue
            if rolling and cues and line.startswith(cues[-1][1] + " "):
                cues[-1] = (cues[-1][0], line)  # a line growing word by word
                continue
            cues.append((start, line))
    return cues


def format_transcript(cues: list[tuple[float, str]], include_timestamps: bool) -> str:
    if not include_timestamps:
        return " ".join(text for _, text in cues)
    return "\n".join(f"[{int(t) // 3600:02d}:{int(t) % 3600 // 60:02d}:{int(t) % 60:02d}] {line}"
                     for t, line in cues)


def ytdlp(args: list[str], timeout: int = 120) -> str:
    if not (exe := shutil.which("yt-dlp")):
        raise SkillError("yt-dlp is not installed or not on PATH (pip install yt-dlp)")
    proc = subprocess.Popen([exe, "--ignore-config", "--no-playlist", *args], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise SkillError(f"yt-dlp timed out after {timeout}s", 75) from None
    if proc.returncode != 0:
        raise SkillError(*reversed(classify_error(err)))
    return out


def run(inputs: dict) -> dict:
    video_id = parse_video_id(str(inputs.get("url", "")))  # ValueError -> exit 1
    language = str(inputs.get("language") or "en")
    if not LANG_RE.match(language):
        raise SkillError(f"not a language code: {language!r} (expected e.g. en, pt-BR)")
    url = f"https://www.youtube.com/watch?v={video_id}"
    info = ytdlp(["--skip-download", "--print", "duration", "--print", "%(subtitles)j",
                  "--print", "%(automatic_captions)j", "--", url])
    duration, manual, auto = parse_print_output(info)
    track = choose_track(manual, auto, language)
    if track is None:
        raise SkillError(f"video {video_id} has no captions in language {language!r} (manual "
                         f"tracks: {', '.join(manual) or 'none'}; auto: {len(auto)} languages)")
    key, source = track
    with tempfile.TemporaryDirectory(prefix="yt-subs-") as tmp:
        ytdlp(["--skip-download", "--write-subs", "--write-auto-subs", "--sub-langs",
               re.escape(key), "--sub-format", "vtt", "-o", f"{tmp}/%(id)s.%(ext)s", "--", url])
        files = sorted(Path(tmp).glob("*.vtt"))
        if not files:
            raise SkillError(f"yt-dlp wrote no .vtt file for track {key!r} of video {video_id}")
        cues = parse_vtt(files[0].read_text(encoding="utf-8", errors="replace"))
    if not cues:
        raise SkillError(f"the {source} captions ({key}) of video {video_id} are empty")
    return {"transcript": format_transcript(cues, bool(inputs.get("include_timestamps"))),
            "duration_seconds": duration, "caption_source": source}


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


def main() -> int:
    try:
        write_outputs(run(read_inputs()))
    except SkillError as exc:
        print(f"youtube-transcript: {exc}", file=sys.stderr)
        return exc.code
    except (ValueError, TypeError) as exc:  # bad URL, unreadable inputs JSON
        print(f"youtube-transcript: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
