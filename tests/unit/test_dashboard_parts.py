"""The dashboard's pure parts: the bind check, basic auth, the Host check, form tokens,
the run form's pairs, the SVG trend chart and the layered graph layout (the pages
themselves: tests/integration/test_dashboard.py and test_dashboard_guard.py)."""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from starlette.datastructures import Headers

from orchestrator.dashboard.auth import authorized, same_origin
from orchestrator.dashboard.charts import DURATION, nice_max, trend_svg
from orchestrator.dashboard.config import (
    Credentials,
    DashboardConfig,
    check_bind,
    is_loopback,
    parse_credentials,
)
from orchestrator.dashboard.context import TEMPLATES
from orchestrator.dashboard.csrf import FormTokens
from orchestrator.dashboard.graph_svg import Edge, Node, graph_svg, layers
from orchestrator.dashboard.hosts import host_policy, parse_hosts, refusal_text, split_host
from orchestrator.dashboard.paging import parse_time_cursor, time_cursor
from orchestrator.dashboard.queries import TrendPoint
from orchestrator.dashboard.run_form import fields, pairs
from shared.errors import BadCursor, DashboardError
from shared.manifest import Manifest


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.5", "::1", "[::1]", "localhost"])
def test_loopback_hosts_need_no_credentials(host: str) -> None:
    assert is_loopback(host)
    check_bind(host, None)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.5", "dashboard.example.com"])
def test_other_hosts_are_refused_without_credentials(host: str) -> None:
    with pytest.raises(DashboardError, match="SKILLQ_DASHBOARD_AUTH=USER:PASSWORD"):
        check_bind(host, None)
    check_bind(host, Credentials("ada", "pw"))


def test_credentials_parse_and_never_show_the_password() -> None:
    assert parse_credentials(None) is None and parse_credentials("  ") is None
    creds = parse_credentials("ada:pa:ss")
    assert creds == Credentials("ada", "pa:ss") and "pa:ss" not in repr(creds)
    for bad in ("ada", ":pw", "ada:"):
        with pytest.raises(DashboardError, match="USER:PASSWORD"):
            parse_credentials(bad)


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_basic_auth_accepts_only_the_exact_credentials() -> None:
    creds = Credentials("ada", "s3cret")
    assert authorized(basic("ada", "s3cret"), creds)
    for header in (None, "", basic("ada", "wrong"), basic("bob", "s3cret"), "Bearer x",
                   "Basic !!notbase64", basic("ada", "s3cret").replace("Basic", "Digest")):
        assert not authorized(header, creds), header


def test_cross_site_posts_are_told_apart() -> None:
    assert same_origin(Headers({"host": "127.0.0.1:8765"}))
    assert same_origin(Headers({"host": "127.0.0.1:8765", "origin": "http://127.0.0.1:8765"}))
    assert not same_origin(Headers({"host": "127.0.0.1:8765", "origin": "http://evil.test"}))
    assert not same_origin(Headers({"host": "127.0.0.1:8765", "origin": "null"}))
    # Without an Origin, the Referer decides; with neither, the form token does.
    assert same_origin(Headers({"host": "127.0.0.1:8765",
                                "referer": "http://127.0.0.1:8765/skills/a"}))
    assert not same_origin(Headers({"host": "127.0.0.1:8765",
                                    "referer": "http://evil.test/x?y"}))


@pytest.mark.parametrize(("text", "parsed"), [
    ("Example.COM.", ("example.com", None)), ("127.0.0.1:8765", ("127.0.0.1", 8765)),
    ("[::1]:80", ("::1", 80)), ("[0:0::1]", ("::1", None)), ("::1", ("::1", None)),
    ("a:b", None), ("a:0", None), ("a:70000", None), ("a:", None), ("http://a", None),
    ("a/b", None), ("[a]:80", None), ("[::1]x", None), ("", None), ("u@a", None)])
def test_host_headers_parse_strictly(text: str, parsed: tuple[str, int | None] | None
                                     ) -> None:
    assert split_host(text) == parsed


def test_a_loopback_dashboard_answers_to_its_address_and_loopback_names_only() -> None:
    policy = host_policy("127.0.0.1", 8765)
    for ok in ("127.0.0.1:8765", "localhost:8765", "LOCALHOST.:8765", "[::1]:8765"):
        assert policy.allows(ok), ok
    for bad in (None, "", "evil.example:8765", "evil.example", "127.0.0.1:8766",
                "127.0.0.1", "localhost.evil.example:8765", "10.0.0.5:8765"):
        assert not policy.allows(bad), bad
    assert host_policy("127.0.0.1", 80).allows("localhost")  # no port in Host: port 80


def test_other_binds_and_configured_hosts() -> None:
    lan = host_policy("192.168.1.5", 8765, "dash.example.internal, proxy.example:443")
    assert lan.allows("192.168.1.5:8765") and not lan.allows("localhost:8765")
    assert lan.allows("dash.example.internal") and lan.allows("dash.example.internal:9")
    assert lan.allows("proxy.example:443") and not lan.allows("proxy.example:8765")
    wildcard = host_policy("0.0.0.0", 8765)  # an IP literal is no name a page can own
    assert wildcard.allows("10.1.2.3:8765") and wildcard.allows("[fe80::1]:8765")
    assert wildcard.allows("localhost:8765") and not wildcard.allows("evil.example:8765")
    assert host_policy("127.0.0.1", 8765, "*").allows("anything.example:1")


def test_a_bad_hosts_entry_is_refused_naming_the_setting() -> None:
    assert parse_hosts(" , a.example ,") == (frozenset({("a.example", None)}), False)
    with pytest.raises(DashboardError, match=r"SKILLQ_DASHBOARD_HOSTS: 'http://a' is not"):
        parse_hosts("ok.example, http://a")


def test_the_host_refusal_says_what_to_set() -> None:
    text = refusal_text("evil.example:8765", host_policy("127.0.0.1", 8765))
    assert "'evil.example:8765'" in text and "127.0.0.1:8765" in text
    assert "SKILLQ_DASHBOARD_HOSTS" in text and "restart" in text


def test_form_tokens_are_bound_to_their_nonce_and_their_process() -> None:
    tokens, other = FormTokens(), FormTokens()
    nonce = tokens.new_nonce()
    assert tokens.usable_nonce(nonce) == nonce
    assert tokens.valid(nonce, tokens.token(nonce))
    for nonce_, token in ((nonce, other.token(nonce)), (tokens.new_nonce(), tokens.token(nonce)),
                          (nonce, ""), (None, tokens.token(nonce)), (nonce, None)):
        assert not tokens.valid(nonce_, token)
    for junk in (None, "", "short", "x" * 200, "a;b=c" * 5):
        assert tokens.usable_nonce(junk) is None


def test_every_post_form_of_the_templates_carries_the_token() -> None:
    forms = 0
    for template in Path(TEMPLATES).glob("*.html"):
        for tag in re.findall(r"<form\b[^>]*>(?:\{\{[^}]*\}\})?", template.read_text()):
            if 'method="post"' in tag.lower():
                forms += 1
                assert tag.endswith("{{ csrf_input(request) }}"), (template.name, tag)
    assert forms >= 7


def test_the_body_limit_leaves_room_for_an_input_over_the_cap() -> None:
    config = DashboardConfig("127.0.0.1", 8765, Path("v"), "postgresql://x", input_max_bytes=10)
    assert config.max_body_bytes == 80 + 64 * 1024


def manifest() -> Manifest:
    return Manifest.model_validate({
        "name": "greet", "description": "Greet. Use it in tests.", "version": 1,
        "inputs": [{"name": "name", "type": "string", "required": True},
                   {"name": "fail", "type": "boolean", "default": False},
                   {"name": "tags", "type": "string[]"}],
        "outputs": [{"name": "greeting", "type": "string"}],
        "approach": "code", "run": {"command": "python3 greet.py"}})


def test_the_form_becomes_cli_pairs_and_empty_fields_are_not_given() -> None:
    m = manifest()
    assert [(f.name, f.widget, f.default) for f in fields(m)] == [
        ("name", "text", ""), ("fail", "boolean", "false"), ("tags", "textarea", "")]
    assert pairs(m, {"name": "Ada", "fail": "", "tags": '["a"]', "other": "x"}) == [
        "name=Ada", 'tags=["a"]']


def points(versions: list[int]) -> list[TrendPoint]:
    start = datetime(2026, 11, 30, tzinfo=UTC)
    return [TrendPoint(f"run-{i}", v, "failed" if i == 1 else "succeeded",
                       start + timedelta(minutes=i), 100.0 * (i + 1), 0.0)
            for i, v in enumerate(versions)]


def test_a_trend_chart_has_one_point_per_run_and_marks_versions() -> None:
    svg = str(trend_svg(points([1, 1, 2, 2, 3]), DURATION))
    assert len(re.findall(r"<circle class=\"point\"", svg)) == 5
    assert re.findall(r'class="version-label"[^>]*>(v\d)<', svg) == ["v1", "v2", "v3"]
    assert 'fill="white" stroke="#dc2626"' in svg  # the failed run
    assert "no finished runs" in str(trend_svg([], DURATION))


def test_nice_maxima_are_round() -> None:
    assert [nice_max(v) for v in (0.0, 0.06, 0.3, 7, 11, 240)] == [0.25, 0.1, 0.5, 10, 20, 250]


def test_layers_follow_the_longest_path_and_survive_a_cycle() -> None:
    nodes = [Node(k, k) for k in "abcd"]
    edges = [Edge("a", "b"), Edge("b", "c"), Edge("a", "c"), Edge("c", "d"), Edge("d", "c")]
    found = layers(nodes, edges)
    assert found["a"] == 0 and found["b"] == 1 and found["c"] >= 2
    svg = str(graph_svg(nodes, edges, "<g>"))
    assert svg.count('class="node ') == 4 and "&lt;g&gt;" in svg


def test_cursors_round_trip_and_bad_ones_are_refused() -> None:
    at = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)
    assert parse_time_cursor(time_cursor(at, "run-1")) == (at, "run-1")
    with pytest.raises(BadCursor):
        parse_time_cursor("yesterday")
