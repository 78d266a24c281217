"""One settings tree, read from SKILLQ_* environment variables (and a .env file).

Nothing is read at import time: call ``get_settings()`` where a setting is needed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.errors import ConfigError


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SKILLQ_", env_file=".env", extra="ignore")

    vault: Path = Field(default=Path("vault"), description="the vault folder of skills")
    home: Path = Field(default=Path.home() / ".skillq",
                       description="local state: embedded servers, caches, secrets")
    broker_url: str | None = Field(default=None, description="Redis (redis://) or RabbitMQ "
                                   "(amqp://) URL; unset = embedded Redis "
                                   "(docs/scaling.md)")
    broker_heartbeat_s: float = Field(default=60.0, ge=0, description="RabbitMQ only: the "
                                      "AMQP heartbeat; a peer silent for about this long "
                                      "(a machine gone without closing its connections) "
                                      "is dropped and its unacknowledged messages go back "
                                      "to their queues; 0 = none")
    broker_confirm_publish: bool = Field(default=True, description="RabbitMQ only: wait "
                                         "for the broker to confirm each message it takes "
                                         "(publisher confirms), so none is lost to a "
                                         "broker crash just after it was sent")
    result_backend: str | None = Field(default=None, description="where Celery keeps "
                                       "results (a Redis URL); unset = broker_url when it "
                                       "is Redis, none with RabbitMQ (docs/scaling.md)")
    database_url: str | None = Field(default=None, description="PostgreSQL URL; unset = "
                                     "embedded")
    build_web_access: bool = Field(default=False, description="a skill build's planner "
                                   "may fetch web pages and API docs (its fetch_page tool); "
                                   "off: it plans from the task and the vault alone")
    build_eval_runs: int = Field(default=3, ge=1, description="a skill build's gate for an "
                                 "agent sub-skill: each of its test cases runs this many "
                                 "times and passes only when every run passes (pass^N = "
                                 "1); a script sub-skill's case runs once")
    discovery_ttl_s: float = Field(default=5.0, ge=0,
                                   description="how long a vault scan is reused")
    max_step_timeout_s: float = Field(default=3600, gt=0, description="the longest a step "
                                      "may run; the broker's visibility timeout exceeds it")
    question_timeout_s: float = Field(default=86400, gt=0, description="how long an agent "
                                      "step's question (ask_question) waits for an answer "
                                      "before its default holds, or the step fails")
    result_ttl_s: int = Field(default=86400, gt=0, description="how long Celery keeps results")
    inline_output_bytes: int = Field(default=64 * 1024, ge=0, description="outputs larger "
                                     "than this travel by reference through the store")
    max_output_bytes: int = Field(default=64 * 1024 * 1024, gt=0,
                                  description="a step's outputs past this are refused")
    input_max_bytes: int = Field(default=1024 * 1024, gt=0, description="the largest value "
                                 "one run input may have (UTF-8 bytes; JSON for lists and "
                                 "objects), from `skillq run`/`skillq schedule add` and the "
                                 "dashboard's run form; the dashboard also refuses request "
                                 "bodies past 8 times this plus 64 KiB")
    file_max_bytes: int = Field(default=64 * 1024 * 1024, gt=0, description="the largest "
                                "file one input or output of type file may be (its bytes "
                                "travel through the shared store, in PostgreSQL)")
    heartbeat_s: float = Field(default=5.0, gt=0, description="how often a running step "
                               "proves its worker alive")
    dead_after_s: float = Field(default=30.0, gt=0, description="a running step whose "
                                "heartbeat is older than this is re-dispatched")
    database_outage_s: float = Field(default=600.0, gt=0, description="how long a worker "
                                     "holds a finished result, a claimed message or a "
                                     "planning step, and a client waits, while PostgreSQL "
                                     "cannot be reached, before giving up")
    batch_target_ms: float = Field(default=200.0, ge=0, description="a quick step's fan-out "
                                   "items go several to a message, about this much of its "
                                   "recent average work each; 0 = one item per message")
    daemon: str | None = Field(default=None, description="this machine's daemon name in "
                               "announcements and per-daemon queues; unset = the host name")
    device_id: str | None = Field(default=None, max_length=128, description="this "
                                  "machine's identity: a step given a folder (a directory "
                                  "input) runs on a daemon of the machine with this id; "
                                  "unset = /etc/machine-id, else the host name")
    role: Literal["agent", "daily-driver"] = Field(default="agent", description="routing "
                                                   "prefers agent daemons over daily drivers")
    software: str = Field(default="", description="comma-separated programs to look for on "
                          "PATH besides those the vault's skills require")
    capabilities: str = Field(default="", description="comma-separated extra capability tags "
                              "this daemon announces (gpu, browser, desktop are detected)")
    mcp_servers: SecretStr = Field(default=SecretStr(""), description="the MCP servers "
                                   "agent steps on this daemon may use (a skill's "
                                   "requires.mcp), as JSON: {NAME: {\"command\": [...]} or "
                                   "{\"url\": \"...\"}}, credentials in \"env\"/\"headers\" "
                                   "as ${secret:NAME}; announced by name only "
                                   "(docs/machines.md, MCP servers)")
    daemon_offline_after_s: float = Field(default=30.0, gt=0, description="a daemon with no "
                                          "heartbeat for this long is shown offline and "
                                          "not routed to")
    routing_reuse_s: float = Field(default=1.0, ge=0, description="a planning pass routes by "
                                   "this process's read of the online daemons when it is at "
                                   "most this old (a step is refused only on a fresh read); "
                                   "0 = read them every pass")
    secrets_file: Path | None = Field(default=None, description="the 0600 secrets file; "
                                      "unset = <home>/secrets.toml")
    task_events: bool = Field(default=False, description="workers and clients send Celery "
                              "task events from the start (for Flower); off by default "
                              "because events cost a third of a fan-out's throughput")
    message_ttl_s: float = Field(default=86400.0, gt=0, description="how long a signed task "
                                 "message stays valid, counted from when it is due (sent, or "
                                 "its countdown/ETA); a worker refuses it later "
                                 "(docs/security.md)")
    message_clock_skew_s: float = Field(default=300.0, ge=0, description="how far the clocks "
                                        "of the machines may differ when a worker checks a "
                                        "message's issue and expiry times")
    key_refresh_s: float = Field(default=10.0, gt=0, description="workers re-read the "
                                 "enrolled daemon keys from PostgreSQL at least this often "
                                 "(and at once for a key they do not know), so a revocation "
                                 "takes effect within it")
    beat_tick_s: float = Field(default=10.0, gt=0, description="the longest `skillq beat` "
                               "sleeps between looks at the schedules table (it also wakes "
                               "at the next due time); a beat waiting for the lock retries "
                               "this often")
    beat_grace_s: float = Field(default=120.0, ge=0, description="a schedule due longer ago "
                                "than this was missed (beat was down): its --catch-up policy "
                                "decides whether it runs once or is skipped")
    flower_auth: SecretStr | None = Field(default=None, description="user:password (comma "
                                          "separated for several) that `skillq flower` "
                                          "requires; unset = Flower only on 127.0.0.1")
    dashboard_hosts: str = Field(default="", description="comma-separated extra Host names "
                                 "(name or name:port; * turns the check off) the dashboard "
                                 "answers to besides the address it listens on, e.g. the "
                                 "name a reverse proxy forwards")
    api_port: int = Field(default=0, ge=0, le=65535, description="the port the local API "
                          "(`skillq api`, started by `skillq up`; 127.0.0.1 only) listens "
                          "on; 0 = a free one, recorded in SKILLQ_HOME/api.json")
    chromium_path: Path | None = Field(default=None, description="the browser dom0 steps "
                                       "launch; unset = Playwright's own, else the system's")
    agent_model: str | None = Field(default=None, description="the model agent steps use "
                                    "on this daemon (provider:name, e.g. "
                                    "anthropic:claude-haiku-4-5); a skill's own model wins "
                                    "only with model_override: true; unset = the skill's "
                                    "model")
    agent_prompt_budget_chars: int = Field(default=60_000, ge=0, description="how much of an "
                                           "agent step's system prompt the SKILL.md body and "
                                           "its folder's text files may fill; files past it "
                                           "are listed for the model to read instead")
    agent_catalog_budget_chars: int = Field(default=15_000, ge=0, description="how long the "
                                            "list of skills an agent step may load can be; "
                                            "past it the list is cut and the step's record "
                                            "says which skills were left out")

    sandbox: Literal["auto", "bwrap", "off"] = Field(default="auto", description="how steps "
                                                     "are isolated: bwrap = bubblewrap, "
                                                     "required; auto = bubblewrap where it "
                                                     "runs, else a plain unprivileged account "
                                                     "(as root) or nothing, with a warning; "
                                                     "off = steps run as the worker "
                                                     "(docs/security.md)")
    step_account: str = Field(default="skillq-step", description="the unprivileged account "
                              "steps run as when the worker runs as root (created if missing)")
    step_memory_mb: int = Field(default=4096, ge=16, description="a step's memory, unless "
                                "its SKILL.md sets limits.memory_mb")
    step_processes: int = Field(default=1024, ge=1, description="processes and threads a "
                                "step may have at once (limits.processes)")
    step_cpu_s: int = Field(default=3600, ge=1, description="CPU seconds each process of a "
                            "step may use (limits.cpu_s)")
    step_file_mb: int = Field(default=4096, ge=1, description="the largest file a step may "
                              "write (limits.file_mb)")
    step_open_files: int = Field(default=4096, ge=16, description="open files per process of "
                                 "a step (limits.open_files)")
    step_binds: str = Field(default="", description="comma-separated folders every step on "
                            "this daemon may read and write (bound into its sandbox at the "
                            "same path; the step account needs write access to them)")
    step_network: bool = Field(default=True, description="whether steps reach the network "
                               "unless their SKILL.md sets limits.network")


def get_settings() -> Settings:
    """The settings; ConfigError naming each variable that does not parse (the CLI shows
    it as a message, not a traceback)."""
    try:
        return Settings()
    except ValidationError as exc:
        lines = [f"SKILLQ_{'_'.join(str(p) for p in e['loc']).upper()}: {e['msg']} (got "
                 f"{e.get('input')!r}); fix or unset it" for e in exc.errors()]
        raise ConfigError("\n".join(lines)) from None
