"""Which rows belong to a vault's history, and how a row becomes one JSON line and back.

Adding a table to archives is one line in TABLES: its Table, the WHERE clause picking the
vault's rows (from a Scope), and the column naming the vault, if any (rewritten to the
target vault on import). Order matters: a table comes after the tables its foreign keys
point to, and ``artifacts`` comes last because it is chosen by the references the rows
before it hold.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ARRAY, ColumnElement, DateTime, LargeBinary, String, Table, any_, bindparam
from sqlalchemy import select as sql_select

from shared.db.library_models import LibrarySkill
from shared.db.models import Artifact, CacheEntry, PipelineRun, StepRun

ARTIFACT_KEY = re.compile(r"^sha256:[0-9a-f]{64}$")


@dataclass
class Scope:
    """What picks a vault's rows: its key, and artifact keys met in rows exported so far."""

    vault: str
    artifact_keys: set[str] = field(default_factory=set)

    def runs(self) -> Any:
        return sql_select(PipelineRun.id).where(PipelineRun.vault == self.vault)

    def step_runs(self) -> Any:
        return sql_select(StepRun.id).where(StepRun.run_id.in_(self.runs()))

    def artifacts(self) -> ColumnElement[bool]:
        keys = bindparam("artifact_keys", sorted(self.artifact_keys), type_=ARRAY(String))
        return Artifact.key == any_(keys)


@dataclass(frozen=True)
class TableSpec:
    table: Table
    where: Callable[[Scope], ColumnElement[bool]]
    vault_column: str | None = None

    @property
    def name(self) -> str:
        return self.table.name


def _table(model: Any) -> Table:
    table: Table = model.__table__
    return table


TABLES: tuple[TableSpec, ...] = (
    TableSpec(_table(LibrarySkill), lambda s: LibrarySkill.vault == s.vault, "vault"),
    TableSpec(_table(PipelineRun), lambda s: PipelineRun.vault == s.vault, "vault"),
    TableSpec(_table(StepRun), lambda s: StepRun.run_id.in_(s.runs())),
    TableSpec(_table(CacheEntry), lambda s: CacheEntry.step_run_id.in_(s.step_runs())),
    TableSpec(_table(Artifact), lambda s: s.artifacts()),  # keep last
)


def encode_row(table: Table, row: Mapping[Any, Any]) -> dict[str, Any]:
    """A row as JSON-ready values: datetimes ISO 8601, bytes base64."""
    found: dict[str, Any] = {}
    for column in table.columns:
        value = row[column.key]
        if value is not None and isinstance(column.type, DateTime):
            value = value.isoformat()
        elif value is not None and isinstance(column.type, LargeBinary):
            value = base64.b64encode(value).decode("ascii")
        found[column.key] = value
    return found


# Columns naming rows an archive does not carry: improvement notes stay with the database
# they were left in, so an imported attempt's note id would name another database's note.
UNCARRIED = {"step_runs": frozenset({"note_id"})}


def decode_row(table: Table, data: Mapping[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {}
    dropped = UNCARRIED.get(table.name, frozenset())
    for key, value in data.items():
        column = table.columns[key]
        if key in dropped:
            value = None
        elif value is not None and isinstance(column.type, DateTime):
            value = datetime.fromisoformat(value)
        elif value is not None and isinstance(column.type, LargeBinary):
            value = base64.b64decode(value)
        row[key] = value
    return row


def artifact_keys(value: Any) -> Iterator[str]:
    """Every string shaped like an artifact key ("sha256:<hex>") anywhere in ``value``:
    `{"$ref": ...}` outputs, and the keys other tables keep (file stores, for instance).
    A key with no artifact behind it simply selects nothing."""
    if isinstance(value, str):
        if ARTIFACT_KEY.match(value):
            yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from artifact_keys(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from artifact_keys(item)
