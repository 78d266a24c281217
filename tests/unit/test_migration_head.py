"""The newest migration as every CLI command reads it (without Alembic) is Alembic's head."""

from __future__ import annotations

from alembic.script import ScriptDirectory

from shared.db.migrate import alembic_config, head_revision


def test_the_head_read_from_the_files_is_alembics() -> None:
    script = ScriptDirectory.from_config(alembic_config("postgresql://unused/none"))
    assert head_revision() == script.get_current_head()
