"""mask_url: what `skillq up`, logs and errors show of a URL (never its password)."""

from __future__ import annotations

import pytest

from shared.endpoints import Endpoints, mask_url


@pytest.mark.parametrize(("url", "shown"), [
    ("redis://:s3cret@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
    ("postgresql+psycopg://postgres:p%40ss%2Fw@127.0.0.1:5432/skillq",
     "postgresql+psycopg://postgres:***@127.0.0.1:5432/skillq"),
    ("redis://user:pw@[::1]:6379/2?ssl_cert_reqs=none",
     "redis://user:***@[::1]:6379/2?ssl_cert_reqs=none"),
    ("redis://:a:b@host/0", "redis://:***@host/0"),  # the password is all after the first ':'
    ("sentinel://:x@h1:26379;sentinel://:y@h2:26379",
     "sentinel://:***@h1:26379;sentinel://:***@h2:26379"),
    ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
    ("postgresql+psycopg://postgres@127.0.0.1:5432/skillq",
     "postgresql+psycopg://postgres@127.0.0.1:5432/skillq"),
    ("redis://:pw@[::1/0", "***"),  # unparseable: nothing of it rather than a leak
])
def test_mask_url_hides_only_the_password(url: str, shown: str) -> None:
    assert mask_url(url) == shown


def test_endpoints_repr_shows_no_password() -> None:
    found = Endpoints(broker_url="redis://:rpw@h:1/0", result_backend="redis://:rpw@h:1/0",
                      database_url="postgresql+psycopg://postgres:dbpw@h:2/skillq")
    assert "rpw" not in repr(found) and "dbpw" not in repr(found)
    assert found.env()["SKILLQ_DATABASE_URL"].endswith(":dbpw@h:2/skillq")  # handed on whole
