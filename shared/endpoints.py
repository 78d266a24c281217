"""Where the broker and the database are: configured URLs, else the embedded servers."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

MASK = "***"


def mask_url(url: str) -> str:
    """url with its password (if any) replaced by ***: for anything printed or logged.

    Several URLs joined by ";" (Kombu's failover list) are masked each."""
    if ";" in url:
        return ";".join(map(mask_url, url.split(";")))
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # not a URL we can take apart: print none of it rather than leak
        return MASK
    if password is None:
        return url
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user = userinfo.partition(":")[0]
    return parts._replace(netloc=f"{user}:{MASK}@{hostport}").geturl()


@dataclass(frozen=True, slots=True, repr=False)
class Endpoints:
    broker_url: str
    database_url: str
    result_backend: str

    def env(self) -> dict[str, str]:
        """The variables that point another skillq process at the same servers."""
        return {"SKILLQ_BROKER_URL": self.broker_url,
                "SKILLQ_DATABASE_URL": self.database_url,
                "SKILLQ_RESULT_BACKEND": self.result_backend}

    def __repr__(self) -> str:  # the URLs carry passwords: a stray print or log shows none
        return (f"Endpoints(broker_url={mask_url(self.broker_url)!r}, "
                f"database_url={mask_url(self.database_url)!r}, "
                f"result_backend={mask_url(self.result_backend)!r})")
