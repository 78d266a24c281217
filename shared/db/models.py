"""The PostgreSQL records: pipeline runs, step runs (one row per attempt), the shared
artifact store, and the output cache. Alembic migrations live in shared/db/migrations."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    false,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class PipelineRun(Base):
    """One run of a skill: the top of a pipeline, or a nested orchestrator's run."""

    __tablename__ = "pipeline_runs"
    # created_at is the database's, not read back after the INSERT: a new run's row then
    # goes in its commit's pipeline (shared/db/deferred.py), which returns no rows.
    __mapper_args__ = {"eager_defaults": False}  # noqa: RUF012 - SQLAlchemy's own hook
    __table_args__ = (Index("ix_pipeline_runs_skill_finished", "skill", "finished_at"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    skill: Mapped[str] = mapped_column(String(64), index=True)
    version: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16), index=True)
    source: Mapped[str] = mapped_column(String(16))
    vault: Mapped[str] = mapped_column(Text)
    plan: Mapped[dict[str, Any]] = mapped_column(JSONB)  # the frozen steps it runs
    inputs: Mapped[dict[str, Any]] = mapped_column(JSONB)
    input_hash: Mapped[str] = mapped_column(String(71))
    outputs: Mapped[Any | None] = mapped_column(JSONB, nullable=True)
    # step id -> {"state": waiting|running|done, "items": n}: the planner's own ledger,
    # changed only under this row's lock.
    progress: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    watch_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    failed_step: Mapped[str | None] = mapped_column(String(64), nullable=True)
    failed_item: Mapped[int | None] = mapped_column(Integer, nullable=True)
    triggered_by: Mapped[str | None] = mapped_column(String(128), nullable=True)
    parent_step_run_id: Mapped[str | None] = mapped_column(String(160), nullable=True,
                                                           index=True)
    # "<run>/<step>/<item>#<tool call id>": the execute_skill call of an agent step that
    # started this run (migration 0011), so a replayed call finds its run again.
    agent_call: Mapped[str | None] = mapped_column(String(255), nullable=True)
    # The run this one retries (`skillq retry`, migration 0014): its failed steps run
    # again here, its succeeded steps' outputs are reused (lifecycle/retry.py).
    retry_of: Mapped[str | None] = mapped_column(String(40), nullable=True, index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True),
                                                 server_default=func.now(), index=True)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True),
                                                         nullable=True)


class StepRun(Base):
    """One attempt of one step (one item of a fan-out): idempotent by its id."""

    __tablename__ = "step_runs"
    __table_args__ = (Index("ix_step_runs_run_step", "run_id", "step_id", "item_index"),
                      Index("ix_step_runs_skill_finished", "skill", "finished_at"),
                      Index("ix_step_runs_state_heartbeat", "state", "heartbeat_at"),
                      # What the planner asks of one step, an index range each (0015).
                      Index("ix_step_runs_run_step_state", "run_id", "step_id", "state",
                            "superseded", "not_before"),
                      Index("ix_step_runs_run_child", "run_id",
                            postgresql_where=text("child_run_id IS NOT NULL")))

    # "<run id>/<step id>/<item or -1>/<attempt>": a redelivered message names the same row.
    id: Mapped[str] = mapped_column(String(160), primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("pipeline_runs.id", ondelete="CASCADE"))
    step_id: Mapped[str] = mapped_column(String(64))
    item_index: Mapped[int] = mapped_column(Integer)  # -1 when the step does not fan out
    attempt: Mapped[int] = mapped_column(Integer)
    skill: Mapped[str] = mapped_column(String(64))
    version: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16))
    source: Mapped[str] = mapped_column(String(16))
    queue: Mapped[str] = mapped_column(String(64))
    inputs: Mapped[Any] = mapped_column(JSONB)
    input_hash: Mapped[str] = mapped_column(String(71))
    outputs: Mapped[Any | None] = mapped_column(JSONB, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    error_kind: Mapped[str | None] = mapped_column(String(32), nullable=True)
    worker: Mapped[str | None] = mapped_column(String(200), nullable=True)
    worker_pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    daemon: Mapped[str | None] = mapped_column(String(64), nullable=True)
    route: Mapped[str | None] = mapped_column(Text, nullable=True)  # where it went and why
    cache_hit: Mapped[bool] = mapped_column(default=False)
    child_run_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    duration_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    tokens_in: Mapped[int] = mapped_column(Integer, default=0)
    tokens_out: Mapped[int] = mapped_column(Integer, default=0)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    stdout_tail: Mapped[str | None] = mapped_column(Text, nullable=True)
    stderr_tail: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True),
                                                 server_default=func.now())
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True),
                                                         nullable=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True),
                                                          nullable=True)
    not_before: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # dom0/cmd0: the wait for the machine's screen lock, and when it was held.
    lock_wait_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    locked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    unlocked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # The improvement note this final failure was counted on (shared/notes.py): a note
    # keeps only its latest run, so a run's page finds its own notes through this.
    note_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # A later attempt of this item exists (migration 0015): a retrying or lost attempt
    # keeps its state, and this tells the planner it needs no next attempt any more.
    superseded: Mapped[bool] = mapped_column(Boolean, default=False,
                                             server_default=false())


class StepCount(Base):
    """How many items of a run's step have their newest attempt in ``state``: kept by
    lifecycle/step_counts.py in the transactions that change states (migration 0015)."""

    __tablename__ = "step_counts"

    run_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    step_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    state: Mapped[str] = mapped_column(String(16), primary_key=True)
    items: Mapped[int] = mapped_column(BigInteger)


class Artifact(Base):
    """Content-addressed blobs every daemon can reach: large outputs travel as references."""

    __tablename__ = "artifacts"

    key: Mapped[str] = mapped_column(String(71), primary_key=True)  # "sha256:<hex>"
    size: Mapped[int] = mapped_column(BigInteger)
    media_type: Mapped[str] = mapped_column(String(100))
    content: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True),
                                                 server_default=func.now())


class CacheEntry(Base):
    __tablename__ = "cache_entries"

    key: Mapped[str] = mapped_column(String(71), primary_key=True)
    skill: Mapped[str] = mapped_column(String(64), index=True)
    version: Mapped[int] = mapped_column(Integer)
    outputs: Mapped[Any] = mapped_column(JSONB)
    step_run_id: Mapped[str] = mapped_column(String(160))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True),
                                                 server_default=func.now())
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)


class SkillStats(Base):
    """Running totals per skill, kept as attempts and runs end, so a skill's
    benchmarks.json aggregates cost one row read however long its history grows."""

    __tablename__ = "skill_stats"

    skill: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), primary_key=True)  # "step" | "pipeline"
    runs: Mapped[int] = mapped_column(BigInteger, default=0)
    successes: Mapped[int] = mapped_column(BigInteger, default=0)
    duration_ms_sum: Mapped[float] = mapped_column(Float, default=0.0)
    duration_n: Mapped[int] = mapped_column(BigInteger, default=0)  # runs with a duration
    cost_usd_sum: Mapped[float] = mapped_column(Float, default=0.0)
    last_run: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # Success rates are production figures: test runs (some meant to fail) are judged by
    # their expectation in test_results instead (migration 0008).
    prod_runs: Mapped[int] = mapped_column(BigInteger, default=0)
    prod_successes: Mapped[int] = mapped_column(BigInteger, default=0)
