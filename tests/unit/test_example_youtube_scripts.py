"""The youtube example vault's leaf scripts, offline.

The pure helpers (URL parsing, WebVTT cleaning, caption-track choice, image headers) are
imported from the scripts by file path: the skill folders are not a package. The scripts
also run for real through the script protocol (scratch copy of the skill folder, scrubbed
environment, inputs in SKILL_INPUTS and on stdin) on inputs that fail before any network
use, and against local stand-ins: a fake `yt-dlp` on PATH and a loopback HTTP server in
place of the YouTube Data API and the thumbnail CDN. Nothing here touches the internet.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

VAULT = Path(__file__).resolve().parents[2] / "examples" / "youtube"
SCRIPTS = {
    "youtube-channel-videos": "list_videos.py",
    "youtube-comments": "fetch_comments.py",
    "youtube-thumbnails": "get_thumbnail.py",
    "youtube-transcript": "get_transcript.py",
}
VIDEO_ID = "dQw4w9WgXcQ"


def load(skill: str) -> ModuleType:
    path = VAULT / skill / SCRIPTS[skill]
    spec = importlib.util.spec_from_file_location(f"yt_example_{skill.replace('-', '_')}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no __pycache__ in skills
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = saved
    return module


videos_mod = load("youtube-channel-videos")
comments_mod = load("youtube-comments")
thumbs_mod = load("youtube-thumbnails")
transcript_mod = load("youtube-transcript")


def manifest(skill: str) -> dict[str, Any]:
    _, front, _ = (VAULT / skill / "SKILL.md").read_text(encoding="utf-8").split("---\n", 2)
    data: dict[str, Any] = yaml.safe_load(front)
    return data


# --------------------------------------------------------------------------- URL parsing


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://www.youtube.com/@GoogleDevelopers", ("handle", "@GoogleDevelopers")),
        ("youtube.com/@mkbhd/videos", ("handle", "@mkbhd")),
        ("https://m.youtube.com/@some.name-1?si=abc", ("handle", "@some.name-1")),
        ("@GoogleDevelopers", ("handle", "@GoogleDevelopers")),
        ("https://www.youtube.com/@%E3%83%86%E3%82%B9%E3%83%88", ("handle", "@テスト")),
        ("https://www.youtube.com/channel/UC_x5XG1OV2P6uZZ5FSM9Ttw",
         ("id", "UC_x5XG1OV2P6uZZ5FSM9Ttw")),
        ("https://youtube.com/channel/UC_x5XG1OV2P6uZZ5FSM9Ttw/videos",
         ("id", "UC_x5XG1OV2P6uZZ5FSM9Ttw")),
        ("UC_x5XG1OV2P6uZZ5FSM9Ttw", ("id", "UC_x5XG1OV2P6uZZ5FSM9Ttw")),
        ("http://www.youtube.com/user/GoogleDevelopers", ("username", "GoogleDevelopers")),
        ("https://www.youtube.com/c/Veritasium", ("custom", "Veritasium")),
    ],
)
def test_channel_url_shapes(url: str, expected: tuple[str, str]) -> None:
    assert videos_mod.parse_channel_url(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        "",
        "https://example.com/@someone",
        "https://www.youtube.com/watch?v=dQw4w9WgXcQ",
        "https://www.youtube.com/channel/not-a-channel-id",
        "https://www.youtube.com/",
        "@x",
    ],
)
def test_channel_url_rejects(url: str) -> None:
    with pytest.raises(ValueError, match="not a YouTube channel URL"):
        videos_mod.parse_channel_url(url)


VIDEO_URLS = [
    VIDEO_ID,
    f"https://www.youtube.com/watch?v={VIDEO_ID}",
    f"https://youtube.com/watch?feature=share&v={VIDEO_ID}&t=42s",
    f"https://m.youtube.com/watch?v={VIDEO_ID}&list=PL123",
    f"youtube.com/watch?v={VIDEO_ID}",
    f"https://youtu.be/{VIDEO_ID}?si=xyz",
    f"https://www.youtube.com/shorts/{VIDEO_ID}",
    f"https://www.youtube.com/embed/{VIDEO_ID}?autoplay=1",
    f"https://www.youtube.com/live/{VIDEO_ID}",
    f"https://www.youtube-nocookie.com/embed/{VIDEO_ID}",
    f"  https://music.youtube.com/watch?v={VIDEO_ID}  ",
]
BAD_VIDEO_URLS = [
    "",
    "https://vimeo.com/76979871",
    "https://youtube.com/watch?v=example456",  # ids are exactly 11 characters
    "https://www.youtube.com/@GoogleDevelopers",
    "https://youtu.be/",
    "https://evil.example/watch?v=dQw4w9WgXcQ",
]
VIDEO_ID_PARSERS = [comments_mod, thumbs_mod, transcript_mod]  # one copy per skill folder


@pytest.mark.parametrize("module", VIDEO_ID_PARSERS, ids=lambda m: m.__name__)
@pytest.mark.parametrize("url", VIDEO_URLS)
def test_video_url_shapes(module: ModuleType, url: str) -> None:
    assert module.parse_video_id(url) == VIDEO_ID


@pytest.mark.parametrize("module", VIDEO_ID_PARSERS, ids=lambda m: m.__name__)
@pytest.mark.parametrize("url", BAD_VIDEO_URLS)
def test_video_url_rejects(module: ModuleType, url: str) -> None:
    with pytest.raises(ValueError, match="not a YouTube video"):
        module.parse_video_id(url)


@pytest.mark.parametrize(
    ("iso", "seconds"),
    [("PT1H2M3S", 3723), ("PT45S", 45), ("PT10M", 600), ("P1DT1S", 86401), ("P0D", 0),
     ("", 0), ("garbage", 0)],
)
def test_iso_duration(iso: str, seconds: int) -> None:
    assert videos_mod.parse_iso_duration(iso) == seconds


# --------------------------------------------------------------------------- WebVTT

# YouTube's auto-generated captions: each line is typed word by word, repeated in a 10 ms
# cue, then shown again as the upper line of the next cue.
ROLLING_VTT = """WEBVTT
Kind: captions
Language: en

00:00:00.000 --> 00:00:02.310 align:start position:0%
\x20
[Music]

00:00:02.310 --> 00:00:02.320 align:start position:0%
[Music]
\x20

00:00:02.320 --> 00:00:04.500 align:start position:0%
[Music]
hello<00:00:02.800><c> everyone</c><00:00:03.200><c> and</c><00:00:03.600><c> welcome</c>

00:00:04.500 --> 00:00:04.510 align:start position:0%
hello everyone and welcome
\x20

00:00:04.510 --> 00:00:07.000 align:start position:0%
hello everyone and welcome
to<00:00:05.000><c> the</c><00:00:05.500><c> channel</c>

00:00:07.000 --> 00:00:07.010 align:start position:0%
to the channel
\x20

01:02:03.000 --> 01:02:05.000 align:start position:0%
to the channel
&gt;&gt; it&#39;s<01:02:03.500><c> great</c> [Applause]
"""

MANUAL_VTT = (
    "WEBVTT\r\n\r\nSTYLE\r\n::cue { color: yellow }\r\n\r\nNOTE produced by hand\r\n\r\n"
    "1\r\n00:00:18.700 --> 00:00:21.500\r\n♪ We&#39;re no strangers to love ♪\r\n\r\n"
    "2\r\n00:22.000 --> 00:25.000 line:90%\r\n<i>You know the rules</i>\r\n"
    "<v Rick>and so do I</v>\r\n"
)


def test_vtt_rolling_auto_captions_are_deduplicated() -> None:
    cues = transcript_mod.parse_vtt(ROLLING_VTT)
    assert cues == [
        (2.32, "hello everyone and welcome"),
        (4.51, "to the channel"),
        (3723.0, "it's great"),
    ]


def test_vtt_manual_captions_keep_lines_and_drop_markup() -> None:
    cues = transcript_mod.parse_vtt(MANUAL_VTT)
    assert cues == [
        (18.7, "We're no strangers to love"),
        (22.0, "You know the rules"),
        (22.0, "and so do I"),
    ]


def test_vtt_growing_lines_collapse_to_the_longest() -> None:
    vtt = textwrap.dedent("""\
        WEBVTT

        00:00:01.000 --> 00:00:01.500
        so<00:00:01.200><c> today</c>

        00:00:01.500 --> 00:00:02.000
        so today we<00:00:01.700><c> build</c>

        00:00:02.000 --> 00:00:03.000
        a<00:00:02.500><c> server</c>
        """)
    assert transcript_mod.parse_vtt(vtt) == [(1.0, "so today we build"), (2.0, "a server")]


def test_vtt_without_cues_is_empty() -> None:
    assert transcript_mod.parse_vtt("WEBVTT\n\nNOTE nothing here\n") == []
    assert transcript_mod.parse_vtt("WEBVTT\n\n00:00:01.000 --> 00:00:02.000\n[Music]\n") == []


def test_transcript_formats() -> None:
    cues = transcript_mod.parse_vtt(ROLLING_VTT)
    plain = transcript_mod.format_transcript(cues, False)
    assert plain == "hello everyone and welcome to the channel it's great"
    stamped = transcript_mod.format_transcript(cues, True).splitlines()
    assert stamped == ["[00:00:02] hello everyone and welcome", "[00:00:04] to the channel",
                       "[01:02:03] it's great"]


@pytest.mark.parametrize(
    ("manual", "auto", "language", "expected"),
    [
        (["en", "fr"], ["en", "de"], "en", ("en", "manual")),
        (["en-GB", "fr"], ["en", "en-orig"], "en", ("en-GB", "manual")),  # manual beats auto
        ([], ["de", "en-orig"], "en", ("en-orig", "auto-generated")),
        ([], ["en", "en-orig"], "EN", ("en", "auto-generated")),
        (["pt"], [], "pt-BR", ("pt", "manual")),  # regional request, base-language track
        (["de"], ["de"], "en", None),
        ([], [], "en", None),
    ],
)
def test_choose_track(manual: list[str], auto: list[str], language: str,
                      expected: tuple[str, str] | None) -> None:
    assert transcript_mod.choose_track(manual, auto, language) == expected


def test_parse_print_output() -> None:
    out = '212.0\n{"en-GB": [{"ext": "vtt"}], "en": []}\n{"en": [], "fr": []}\n'
    assert transcript_mod.parse_print_output(out) == (212.0, ["en", "en-GB"], ["en", "fr"])
    assert transcript_mod.parse_print_output("NA\nNA\nnull\n") == (0.0, [], [])
    with pytest.raises(transcript_mod.SkillError):
        transcript_mod.parse_print_output("212\n")


@pytest.mark.parametrize(
    ("stderr", "code"),
    [
        ("ERROR: [youtube] abc: Video unavailable. This video is private", 1),
        ("WARNING: retrying\nERROR: unable to download: HTTP Error 429: Too Many Requests", 75),
        ("ERROR: Unable to download webpage: HTTP Error 503: Service Unavailable", 75),
        ("ERROR: <urlopen error [Errno -3] Temporary failure in name resolution>", 75),
        ("WARNING: HTTP Error 429, retrying\nERROR: [youtube] x: Private video", 1),
        ("", 1),
    ],
)
def test_classify_ytdlp_errors(stderr: str, code: int) -> None:
    got, message = transcript_mod.classify_error(stderr)
    assert got == code
    assert message


# --------------------------------------------------------------------------- images


def png_bytes(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    raw = b"".join(b"\x00" + b"\x00\x00\x00" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw))
            + chunk(b"IEND", b""))


def jpeg_bytes(width: int, height: int, sof: int = 0xC0) -> bytes:
    """A JPEG header as cameras write it: APP0, DQT and DHT (0xC4, not a frame) before SOF."""
    def segment(marker: int, payload: bytes) -> bytes:
        return bytes([0xFF, marker]) + struct.pack(">H", len(payload) + 2) + payload

    frame = struct.pack(">BHHB", 8, height, width, 3) + b"\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    return (b"\xff\xd8" + segment(0xE0, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00")
            + segment(0xDB, b"\x00" + bytes(range(64))) + segment(0xC4, b"\x00" + bytes(28))
            + b"\xff\xff"  # a fill byte before the next marker is legal
            + segment(sof, frame) + segment(0xDA, b"\x01\x01\x00\x00\x3f\x00") + b"\xff\xd9")


def test_png_dimensions() -> None:
    assert thumbs_mod.image_size(png_bytes(3, 2)) == ("png", 3, 2)
    assert thumbs_mod.image_size(png_bytes(1280, 1)) == ("png", 1280, 1)


@pytest.mark.parametrize("sof", [0xC0, 0xC2])  # baseline and progressive
def test_jpeg_dimensions(sof: int) -> None:
    assert thumbs_mod.image_size(jpeg_bytes(1280, 720, sof)) == ("jpeg", 1280, 720)
    assert thumbs_mod.image_size(jpeg_bytes(480, 360, sof)) == ("jpeg", 480, 360)


@pytest.mark.parametrize(
    "data", [b"", b"GIF89a\x01\x00\x01\x00", b"\xff\xd8\xff\xd9", b"\xff\xd8\x00\x00\x00\x00"])
def test_image_size_rejects(data: bytes) -> None:
    with pytest.raises(ValueError):
        thumbs_mod.image_size(data)


# --------------------------------------------------------------------------- protocol runs


@dataclass
class Run:
    code: int
    outputs: dict[str, Any]
    stderr: str


TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
}


def check_outputs(skill: str, outputs: dict[str, Any]) -> None:
    declared = {o["name"]: o["type"] for o in manifest(skill)["outputs"]}
    assert set(outputs) == set(declared)
    for name, kind in declared.items():
        value = outputs[name]
        if kind.endswith("[]"):
            assert isinstance(value, list) and all(TYPES[kind[:-2]](v) for v in value), name
        else:
            assert TYPES[kind](value), (name, value)


def run_skill(skill: str, inputs: dict[str, Any], scratch: Path,
              env: dict[str, str] | None = None, path_dirs: tuple[str, ...] = ()) -> Run:
    """Run one leaf per the script protocol: scratch copy, scrubbed env, defaults applied."""
    spec = manifest(skill)
    payload = json.dumps({i["name"]: i["default"] for i in spec["inputs"] if "default" in i}
                         | inputs)
    work = Path(tempfile.mkdtemp(dir=scratch))
    folder = shutil.copytree(VAULT / skill, work / skill)
    (work / "inputs.json").write_text(payload, encoding="utf-8")
    clean = {k: os.environ[k] for k in ("HOME", "LANG") if k in os.environ}
    clean["PATH"] = os.pathsep.join([*path_dirs, str(Path(sys.executable).parent), "/usr/bin",
                                     "/bin"])
    clean |= {"SKILL_INPUTS": str(work / "inputs.json"), "SKILL_OUTPUT": str(work / "out.json")}
    proc = subprocess.run(shlex.split(spec["run"]["command"]), cwd=folder, env=clean | (env or {}),
                          input=payload, capture_output=True, text=True, timeout=30,
                          start_new_session=True)
    outputs: dict[str, Any] = {}
    if proc.returncode == 0:
        outputs = json.loads((work / "out.json").read_text(encoding="utf-8"))
        check_outputs(skill, outputs)
    return Run(proc.returncode, outputs, proc.stderr)


@pytest.mark.parametrize(
    ("skill", "inputs", "env", "message"),
    [
        ("youtube-channel-videos", {"channel_url": "https://example.com/foo"},
         {"YOUTUBE_API_KEY": "dummy"}, "not a YouTube channel URL"),
        ("youtube-channel-videos", {"channel_url": "https://www.youtube.com/@GoogleDevelopers"},
         {}, "YOUTUBE_API_KEY is not set"),
        ("youtube-channel-videos", {"channel_url": "@GoogleDevelopers", "since_days": 0},
         {"YOUTUBE_API_KEY": "dummy"}, "since_days must be > 0"),
        ("youtube-comments", {"video_id": "not a video"}, {"YOUTUBE_API_KEY": "dummy"},
         "not a YouTube video id or URL"),
        ("youtube-comments", {"video_id": VIDEO_ID}, {}, "YOUTUBE_API_KEY is not set"),
        ("youtube-comments", {"video_id": VIDEO_ID, "order": "random"},
         {"YOUTUBE_API_KEY": "dummy"}, "order must be"),
        ("youtube-thumbnails", {"video_id": "https://vimeo.com/76979871"}, {},
         "not a YouTube video id or URL"),
        ("youtube-transcript", {"url": "https://example.com/watch?v=dQw4w9WgXcQ"}, {},
         "not a YouTube video URL"),
        ("youtube-transcript", {"url": VIDEO_ID, "language": "en; rm -rf /"}, {},
         "not a language code"),
    ],
)
def test_bad_input_fails_permanently(skill: str, inputs: dict[str, Any], env: dict[str, str],
                                     message: str, tmp_path: Path) -> None:
    run = run_skill(skill, inputs, tmp_path, env)
    assert run.code == 1, run.stderr
    assert message in run.stderr
    assert run.stderr.startswith(f"{skill}: ")
    assert "Traceback" not in run.stderr


def test_transcript_without_ytdlp_fails_clearly(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    # PATH holds only the interpreter's folder and an empty one: no yt-dlp anywhere.
    run_ = subprocess.run([sys.executable, str(VAULT / "youtube-transcript" / SCRIPTS[
        "youtube-transcript"])], input=json.dumps({"url": VIDEO_ID}), capture_output=True,
        text=True, timeout=30, env={"PATH": str(empty), "HOME": str(tmp_path)})
    assert run_.returncode == 1
    assert "yt-dlp is not installed" in run_.stderr


FAKE_YTDLP = """#!{python}
import json, os, re, sys
args = sys.argv[1:]
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
mode = os.environ.get("FAKE_MODE", "manual")
if mode == "unavailable":
    sys.stderr.write("ERROR: [youtube] {vid}: Video unavailable\\n"); sys.exit(1)
if mode == "throttled":
    sys.stderr.write("ERROR: unable to download: HTTP Error 429: Too Many Requests\\n")
    sys.exit(1)
if "--print" in args:
    manual = {{"en": [{{"ext": "vtt"}}]}} if mode == "manual" else {{}}
    print("212.0"); print(json.dumps(manual)); print(json.dumps({{"en": [], "de": []}}))
    sys.exit(0)
template = args[args.index("-o") + 1]
lang = args[args.index("--sub-langs") + 1].replace("\\\\", "")
out = template.replace("%(id)s", "{vid}").replace("%(ext)s", lang + ".vtt")
with open(out, "w") as fh:
    fh.write(os.environ["FAKE_VTT"])
"""


@pytest.fixture
def fake_ytdlp(tmp_path: Path) -> Path:
    folder = tmp_path / "fakebin"
    folder.mkdir()
    exe = folder / "yt-dlp"
    exe.write_text(FAKE_YTDLP.format(python=sys.executable, vid=VIDEO_ID), encoding="utf-8")
    exe.chmod(0o755)
    return folder


@pytest.mark.parametrize(
    ("mode", "vtt", "source", "transcript"),
    [
        ("manual", MANUAL_VTT, "manual",
         "We're no strangers to love You know the rules and so do I"),
        ("auto", ROLLING_VTT, "auto-generated",
         "hello everyone and welcome to the channel it's great"),
    ],
)
def test_transcript_end_to_end_with_fake_ytdlp(fake_ytdlp: Path, tmp_path: Path, mode: str,
                                               vtt: str, source: str, transcript: str) -> None:
    log = tmp_path / "calls.jsonl"
    run = run_skill("youtube-transcript", {"url": f"https://youtu.be/{VIDEO_ID}"}, tmp_path,
                    {"FAKE_MODE": mode, "FAKE_VTT": vtt, "FAKE_LOG": str(log)}, (str(fake_ytdlp),))
    assert run.code == 0, run.stderr
    assert run.outputs == {"transcript": transcript, "duration_seconds": 212.0,
                           "caption_source": source}
    probe, fetch = (json.loads(line) for line in log.read_text().splitlines())
    assert probe.count("--print") == 3 and probe[-1] == f"https://www.youtube.com/watch?v={VIDEO_ID}"
    for flag in ("--skip-download", "--write-subs", "--write-auto-subs"):
        assert flag in fetch
    assert fetch[fetch.index("--sub-format") + 1] == "vtt"
    assert fetch[fetch.index("--sub-langs") + 1] == "en"


@pytest.mark.parametrize(
    ("mode", "code", "message"),
    [("unavailable", 1, "Video unavailable"), ("throttled", 75, "HTTP Error 429")],
)
def test_transcript_maps_ytdlp_errors(fake_ytdlp: Path, tmp_path: Path, mode: str, code: int,
                                      message: str) -> None:
    run = run_skill("youtube-transcript", {"url": VIDEO_ID}, tmp_path,
                    {"FAKE_MODE": mode, "FAKE_VTT": "", "FAKE_LOG": str(tmp_path / "log")},
                    (str(fake_ytdlp),))
    assert (run.code, message in run.stderr) == (code, True), run.stderr


def test_transcript_no_captions_in_language(fake_ytdlp: Path, tmp_path: Path) -> None:
    run = run_skill("youtube-transcript", {"url": VIDEO_ID, "language": "ja"}, tmp_path,
                    {"FAKE_MODE": "manual", "FAKE_VTT": "", "FAKE_LOG": str(tmp_path / "log")},
                    (str(fake_ytdlp),))
    assert run.code == 1
    assert "has no captions in language 'ja'" in run.stderr


# --------------------------------------------------------------------------- loopback API

Route = Callable[[dict[str, str]], tuple[int, Any]]


class FakeYouTube:
    """A loopback server standing in for googleapis.com/youtube/v3 and i.ytimg.com."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.calls: list[tuple[str, dict[str, str]]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                fake.calls.append((parts.path, query))
                route = fake.routes.get(parts.path)
                status, body = route(query) if route else (404, {"error": {"code": 404}})
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()


@pytest.fixture
def youtube(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeYouTube]:
    fake = FakeYouTube()
    for module in (videos_mod, comments_mod, thumbs_mod):
        monkeypatch.setattr(module, "API_BASE", fake.base + "/youtube/v3/")
    monkeypatch.setattr(thumbs_mod, "IMG_BASE", fake.base + "/vi/")
    monkeypatch.setenv("no_proxy", "*")
    monkeypatch.setenv("YOUTUBE_API_KEY", "test-key")
    monkeypatch.setenv("SKILL_OUTPUT", str(tmp_path / "out.json"))
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


def call_main(module: ModuleType, skill: str, inputs: dict[str, Any], tmp_path: Path,
              monkeypatch: pytest.MonkeyPatch) -> tuple[int, dict[str, Any]]:
    spec = manifest(skill)
    payload = {i["name"]: i["default"] for i in spec["inputs"] if "default" in i} | inputs
    (tmp_path / "in.json").write_text(json.dumps(payload), encoding="utf-8")
    monkeypatch.setenv("SKILL_INPUTS", str(tmp_path / "in.json"))
    code = module.main()
    out = tmp_path / "out.json"
    outputs = json.loads(out.read_text(encoding="utf-8")) if code == 0 and out.exists() else {}
    if code == 0:
        check_outputs(skill, outputs)
    return code, outputs


def iso(days_ago: float) -> str:
    return (datetime.now(UTC) - timedelta(days=days_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def playlist_item(vid: str, days_ago: float | None) -> dict[str, Any]:
    details: dict[str, Any] = {"videoId": vid}
    if days_ago is not None:  # private and deleted entries have no videoPublishedAt
        details["videoPublishedAt"] = iso(days_ago)
    return {"snippet": {"title": f"Video {vid}", "channelId": "UC" + "a" * 22,
                        "channelTitle": "Tech Bench", "description": "x" * 900},
            "contentDetails": details}


def test_channel_videos_filters_and_pages(youtube: FakeYouTube, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    channel = {"id": "UC" + "a" * 22, "snippet": {"title": "Tech Bench"},
               "contentDetails": {"relatedPlaylists": {"uploads": "UU" + "a" * 22}}}
    pages = {
        "": {"items": [playlist_item("AAAAAAAAAA1", 1), playlist_item("AAAAAAAAAA2", None),
                       playlist_item("AAAAAAAAAA3", 3)], "nextPageToken": "p2"},
        "p2": {"items": [playlist_item("AAAAAAAAAA4", 6), playlist_item("AAAAAAAAAA5", 9)],
               "nextPageToken": "p3"},
        "p3": {"items": [playlist_item("AAAAAAAAAA6", 20)], "nextPageToken": "p4"},
    }
    youtube.routes = {
        "/youtube/v3/channels": lambda q: (200, {"items": [channel]} if q.get("forHandle")
                                           == "@techbench" else {"items": []}),
        "/youtube/v3/playlistItems": lambda q: (200, pages[q.get("pageToken", "")]),
        "/youtube/v3/videos": lambda q: (200, {"items": [
            {"id": vid, "contentDetails": {"duration": "PT10M5S"},
             "statistics": {"viewCount": "1000", "commentCount": "7"}}
            for vid in q["id"].split(",")]}),
    }
    code, out = call_main(videos_mod, "youtube-channel-videos",
                          {"channel_url": "https://www.youtube.com/@techbench"}, tmp_path,
                          monkeypatch)
    assert code == 0
    assert [v["id"] for v in out["videos"]] == ["AAAAAAAAAA1", "AAAAAAAAAA3", "AAAAAAAAAA4"]
    first = out["videos"][0]
    assert first["url"] == "https://www.youtube.com/watch?v=AAAAAAAAAA1"
    assert first["channel_title"] == "Tech Bench" and len(first["description"]) == 500
    assert (first["duration_seconds"], first["view_count"], first["like_count"],
            first["comment_count"]) == (605, 1000, None, 7)
    assert (out["channel_id"], out["channel_title"]) == ("UC" + "a" * 22, "Tech Bench")
    tokens = [q.get("pageToken") for p, q in youtube.calls if p.endswith("playlistItems")]
    assert tokens == [None, "p2", "p3"]  # stops at the first page with nothing recent
    assert all(q["key"] == "test-key" for _, q in youtube.calls)


@pytest.mark.parametrize(
    ("status", "reason", "code", "message"),
    [(429, "rateLimitExceeded", 75, "HTTP 429"), (503, "backendError", 75, "HTTP 503"),
     (403, "rateLimitExceeded", 75, "rateLimitExceeded"),
     (403, "quotaExceeded", 1, "midnight Pacific"),
     (400, "keyInvalid", 1, "check YOUTUBE_API_KEY")],
)
def test_api_error_mapping(youtube: FakeYouTube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                           capsys: pytest.CaptureFixture[str], status: int, reason: str,
                           code: int, message: str) -> None:
    error = {"error": {"code": status, "message": "nope", "errors": [{"reason": reason}]}}
    youtube.routes = {"/youtube/v3/channels": lambda q: (status, error)}
    got, _ = call_main(videos_mod, "youtube-channel-videos",
                       {"channel_url": "UC" + "b" * 22}, tmp_path, monkeypatch)
    err = capsys.readouterr().err
    assert got == code
    assert message in err
    assert "test-key" not in err


def thread(n: int) -> dict[str, Any]:
    return {"id": f"t{n}", "snippet": {"totalReplyCount": 1, "topLevelComment": {
        "id": f"c{n}", "snippet": {"authorDisplayName": f"@user{n}", "textOriginal": "y" * 1500
                                   if n == 0 else f"comment {n}", "likeCount": n,
                                   "publishedAt": "2026-02-20T10:00:00Z"}}}}


def test_comments_paginate_up_to_max(youtube: FakeYouTube, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    def page(q: dict[str, str]) -> tuple[int, Any]:
        start = int(q.get("pageToken") or 0)
        items = [thread(n) for n in range(start, start + int(q["maxResults"]))]
        return 200, {"items": items, "nextPageToken": str(start + len(items))}

    youtube.routes = {"/youtube/v3/commentThreads": page}
    code, out = call_main(comments_mod, "youtube-comments",
                          {"video_id": f"https://youtu.be/{VIDEO_ID}", "max_comments": 150},
                          tmp_path, monkeypatch)
    assert code == 0
    assert out["video_id"] == VIDEO_ID and out["comments_disabled"] is False
    assert len(out["comments"]) == 150
    assert out["comments"][1] == {"id": "c1", "author": "@user1", "text": "comment 1",
                                  "like_count": 1, "reply_count": 1,
                                  "published_at": "2026-02-20T10:00:00Z"}
    assert len(out["comments"][0]["text"]) == 1000
    sizes = [q["maxResults"] for p, q in youtube.calls if p.endswith("commentThreads")]
    assert sizes == ["100", "50"]


def test_comments_disabled_is_not_a_failure(youtube: FakeYouTube, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    error = {"error": {"code": 403, "errors": [{"reason": "commentsDisabled"}]}}
    youtube.routes = {"/youtube/v3/commentThreads": lambda q: (403, error)}
    code, out = call_main(comments_mod, "youtube-comments", {"video_id": VIDEO_ID}, tmp_path,
                          monkeypatch)
    assert code == 0
    assert out == {"video_id": VIDEO_ID, "comments": [], "comments_disabled": True}


def test_thumbnail_falls_back_from_maxres_without_key(
        youtube: FakeYouTube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("YOUTUBE_API_KEY")
    youtube.routes = {f"/vi/{VIDEO_ID}/maxresdefault.jpg": lambda q: (404, jpeg_bytes(120, 90)),
                      f"/vi/{VIDEO_ID}/hqdefault.jpg": lambda q: (200, jpeg_bytes(480, 360))}
    code, out = call_main(thumbs_mod, "youtube-thumbnails",
                          {"video_id": VIDEO_ID, "output_dir": str(tmp_path / "thumbs")},
                          tmp_path, monkeypatch)
    assert code == 0
    assert out["thumbnail_url"].endswith(f"/vi/{VIDEO_ID}/hqdefault.jpg")
    assert (out["width"], out["height"]) == (480, 360)
    saved = Path(out["path"])
    assert saved == (tmp_path / "thumbs" / f"{VIDEO_ID}.jpg").resolve()
    assert saved.read_bytes() == jpeg_bytes(480, 360) and out["bytes"] == saved.stat().st_size


def test_thumbnail_picks_largest_with_key(youtube: FakeYouTube, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def videos(q: dict[str, str]) -> tuple[int, Any]:
        # https-only URLs are accepted from the API: point them back at the loopback CDN.
        return 200, {"items": [{"snippet": {"thumbnails": {
            "default": {"url": "https://i.ytimg.com/vi/x/default.jpg", "width": 120, "height": 90},
            "maxres": {"url": "https://i.ytimg.com/vi/x/maxresdefault.jpg", "width": 1280,
                       "height": 720},
            "high": {"url": "https://i.ytimg.com/vi/x/hqdefault.jpg", "width": 480,
                     "height": 360}}}}]}

    youtube.routes = {"/youtube/v3/videos": videos}
    fetched: list[str] = []

    def http_get(url: str, real: Callable[[str], bytes | None] = thumbs_mod.http_get) -> Any:
        if url.startswith("https://i.ytimg.com/"):
            fetched.append(url)
            return png_bytes(1280, 720)
        return real(url)

    monkeypatch.setattr(thumbs_mod, "http_get", http_get)
    code, out = call_main(thumbs_mod, "youtube-thumbnails",
                          {"video_id": VIDEO_ID, "output_dir": str(tmp_path)}, tmp_path,
                          monkeypatch)
    assert code == 0
    assert fetched == ["https://i.ytimg.com/vi/x/maxresdefault.jpg"]
    assert (out["width"], out["height"], out["path"]) == (1280, 720,
                                                          str(tmp_path / f"{VIDEO_ID}.png"))


def test_thumbnail_missing_video(youtube: FakeYouTube, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("YOUTUBE_API_KEY")
    code, _ = call_main(thumbs_mod, "youtube-thumbnails", {"video_id": VIDEO_ID}, tmp_path,
                        monkeypatch)
    assert code == 1
    assert "no thumbnail found" in capsys.readouterr().err
