"""Dashboard page times at 1k, 10k and 100k runs.

    .venv/bin/python benchmarks/dashboard_pages.py [--sizes 1000,10000,100000]
        [--admin-url postgresql+psycopg://postgres@127.0.0.1:5432/postgres] [--repeat 5]

A scratch database (``skillq_dashbench``, dropped and created again; on the machine's
PostgreSQL by default) gets the migrations, then runs are generated in the database
itself with INSERT ... SELECT generate_series (a pipeline run and its step each, 80 %
of them of the charted skill, 2 % failed with an improvement note, a few nested), and
skill_stats is rebuilt as an import does. The real dashboard app is served by uvicorn
in this process and every page is fetched over HTTP ``--repeat`` times; the table shows
the median and the worst time per page at each size. The data grows from one size to
the next (1k, then 9k more, then 90k more).

Pages: the skills list, the charted skill's page (runs, two trend charts of 200 points,
versions, tests), the runs list (first page, and a page deep in the history by cursor),
one run, the notes list and the daemons list.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import uvicorn
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from orchestrator.connect import Connection
from orchestrator.dashboard.app import create_app
from orchestrator.dashboard.config import DashboardConfig
from shared.celery_app import create_app as celery_app
from shared.db import skill_stats
from shared.db.migrate import upgrade
from shared.db.session import transaction
from shared.endpoints import Endpoints
from shared.settings import Settings

SCRATCH_DB = "skillq_dashbench"
SKILL = "bench-echo"
OTHER_SKILLS = 20
SKILL_MD = """---
name: {name}
description: "Return the text. Use it as the benchmark's charted skill."
version: 3
inputs:
  - name: text
    type: string
    required: true
    description: "The text."
outputs:
  - name: text
    type: string
    description: "The same text."
approach: code
run:
  command: python3 echo.py
  timeout: 30
  retries: 0
---

# {name}

Benchmark fixture.
"""
ECHO = ("import json, os\nfrom pathlib import Path\n"
        "i = json.loads(Path(os.environ['SKILL_INPUTS']).read_text())\n"
        "Path(os.environ['SKILL_OUTPUT']).write_text(json.dumps({'text': i['text']}))\n")

# $1 vault, $2 first index, $3 last index. Run i: the charted skill unless i % 5 == 0;
# version 1..3 in thirds of the whole run range; failed when i % 50 == 0.
GENERATE_RUNS = """
INSERT INTO pipeline_runs (id, skill, version, state, source, vault, plan, inputs,
    input_hash, outputs, progress, error, failed_step, triggered_by, parent_step_run_id,
    created_at, started_at, finished_at)
SELECT 'run-' || lpad(to_hex(i), 16, '0'),
       CASE WHEN i % 5 = 0 THEN 'other-' || (i % CAST(:others AS integer)) ELSE :skill END,
       1 + (i * 3) / (CAST(:total AS integer) + 1),
       CASE WHEN i % 50 = 0 THEN 'failed' ELSE 'succeeded' END,
       'production', :vault,
       jsonb_build_object('skill', :skill, 'version', 1, 'outputs_of', 'main',
           'steps', jsonb_build_array(jsonb_build_object('id', 'main', 'skill', :skill,
           'version', 1, 'kind', 'leaf', 'queue', 'default'))),
       jsonb_build_object('text', 'hello ' || i), 'sha256:' || md5(i::text),
       CASE WHEN i % 50 = 0 THEN NULL ELSE jsonb_build_object('text', 'hello ' || i) END,
       '{}'::jsonb,
       CASE WHEN i % 50 = 0 THEN 'step main failed: boom' END,
       CASE WHEN i % 50 = 0 THEN 'main' END, 'cli',
       CASE WHEN i % 97 = 0 THEN 'run-parent/step/-1/1' END,
       now() - make_interval(secs => (CAST(:total AS integer) - i) * 60),
       now() - make_interval(secs => (CAST(:total AS integer) - i) * 60 - 1),
       now() - make_interval(secs => (CAST(:total AS integer) - i) * 60 - 1 - (i % 7) * 0.3)
FROM generate_series(CAST(:first AS integer), CAST(:last AS integer)) AS i
"""
GENERATE_STEPS = """
INSERT INTO step_runs (id, run_id, step_id, item_index, attempt, skill, version, state,
    source, queue, inputs, input_hash, outputs, error, error_kind, worker, daemon, route,
    cache_hit, duration_ms, cost_usd, tokens_in, tokens_out, exit_code, created_at,
    started_at, finished_at)
SELECT r.id || '/main/-1/1', r.id, 'main', -1, 1, r.skill, r.version,
       CASE WHEN r.state = 'failed' THEN 'failed' ELSE 'succeeded' END, 'production',
       'default', r.inputs, r.input_hash, r.outputs, r.error,
       CASE WHEN r.state = 'failed' THEN 'exit' END, 'default@bench', 'bench',
       'default: any online daemon', false,
       extract(epoch FROM r.finished_at - r.started_at) * 1000, 0.001, 10, 20,
       CASE WHEN r.state = 'failed' THEN 1 ELSE 0 END, r.created_at, r.started_at,
       r.finished_at
FROM pipeline_runs r WHERE r.id = ANY(
    SELECT 'run-' || lpad(to_hex(i), 16, '0')
    FROM generate_series(CAST(:first AS integer), CAST(:last AS integer)) AS i)
"""
GENERATE_NOTES = """
INSERT INTO improvement_notes (skill, version, step_id, pipeline, run_id, step_run_id,
    error, error_kind, exit_code, inputs, diagnosis, summary, suggested_fix, worker, count,
    status, first_seen, last_seen)
SELECT r.skill, r.version, 'main-' || i, r.skill, r.id, r.id || '/main/-1/1',
       'boom', 'exit', 1, r.inputs, 'script_error', 'the script exited 1',
       'read the error', 'bench', 1,
       (ARRAY['open', 'dismissed', 'resolved', 'wontfix'])[1 + i % 4],
       r.created_at, r.finished_at
FROM generate_series(CAST(:first AS integer), CAST(:last AS integer)) AS i
JOIN pipeline_runs r ON r.id = 'run-' || lpad(to_hex(i), 16, '0')
WHERE i % 50 = 0
"""
DAEMONS = """
INSERT INTO daemons (name, device_id, platform, role, capabilities, software, skills,
    started_at, heartbeat_at)
SELECT 'bench-' || d, 'dev-' || d, 'linux', 'worker', '["browser"]', '{"git": "/usr/bin/git"}',
       '{}', now(), now()
FROM generate_series(1, 30) AS d ON CONFLICT DO NOTHING
"""


def scratch_url(admin_url: str) -> str:
    admin = make_url(admin_url)
    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {SCRATCH_DB} WITH (FORCE)"))
        conn.execute(text(f"CREATE DATABASE {SCRATCH_DB}"))
    engine.dispose()
    return admin.set(database=SCRATCH_DB).render_as_string(hide_password=False)


def make_vault(root: Path) -> Path:
    for name in [SKILL, *(f"other-{k}" for k in range(OTHER_SKILLS))]:
        folder = root / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(SKILL_MD.format(name=name))
        (folder / "echo.py").write_text(ECHO)
    return root


def grow(url: str, vault: Path, first: int, last: int, total: int) -> float:
    started = time.perf_counter()
    params = {"first": first, "last": last, "total": total, "skill": SKILL,
              "others": OTHER_SKILLS, "vault": str(vault.resolve())}
    with transaction(url) as session:
        session.execute(text(GENERATE_RUNS), params)
        session.execute(text(GENERATE_STEPS), params)
        session.execute(text(GENERATE_NOTES), params)
        session.execute(text(DAEMONS))
        skill_stats.rebuild(session, [SKILL, *(f"other-{k}" for k in range(OTHER_SKILLS))])
    with create_engine(url, isolation_level="AUTOCOMMIT").connect() as conn:
        conn.execute(text("VACUUM ANALYZE"))
    return time.perf_counter() - started


def serve(config: DashboardConfig, conn: Connection) -> uvicorn.Server:
    server = uvicorn.Server(uvicorn.Config(create_app(config, conn), host="127.0.0.1",
                                           port=config.port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the dashboard did not start")
        time.sleep(0.05)
    return server


def fetch_ms(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        response.read()
        assert response.status == 200, (url, response.status)
    return (time.perf_counter() - started) * 1000


def pages(url: str, total: int) -> dict[str, str]:
    deep = f"run-{total // 10:016x}"
    with transaction(url) as session:
        at = session.execute(text("SELECT created_at FROM pipeline_runs WHERE id = :id"),
                             {"id": deep}).scalar_one()
    cursor = urllib.parse.quote(f"{at.isoformat()}~{deep}")
    return {"skills list": "/", f"skill page ({SKILL})": f"/skills/{SKILL}",
            "runs list": "/runs", "runs list, deep page": f"/runs?after={cursor}",
            "run page": f"/runs/run-{total - 1:016x}", "notes (open)": "/notes",
            "notes (all)": "/notes?status=all", "daemons": "/daemons"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--admin-url",
                        default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--port", type=int, default=8799)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    url = scratch_url(args.admin_url)
    upgrade(url)
    settings = Settings(_env_file=None, database_url=url, broker_url="redis://127.0.0.1:1/0")
    endpoints = Endpoints(broker_url="redis://127.0.0.1:1/0", database_url=url,
                          result_backend="redis://127.0.0.1:1/0")
    conn = Connection(settings, endpoints, celery_app(settings, broker_url=endpoints.broker_url,
                                                      result_backend=endpoints.result_backend),
                      embedded=False)
    rows: list[tuple[int, str, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="dashbench-") as tmp:
        vault = make_vault(Path(tmp) / "vault")
        config = DashboardConfig(host="127.0.0.1", port=args.port, vault=vault.resolve(),
                                 database_url=url)
        server = serve(config, conn)
        done = 0
        try:
            for size in sizes:
                took = grow(url, vault, done + 1, size, max(sizes))
                print(f"generated runs {done + 1}..{size} in {took:.1f} s", flush=True)
                done = size
                for page, path in pages(url, size).items():
                    fetch_ms(f"http://127.0.0.1:{args.port}{path}")  # warm the caches
                    times = [fetch_ms(f"http://127.0.0.1:{args.port}{path}")
                             for _ in range(args.repeat)]
                    rows.append((size, page, statistics.median(times), max(times)))
        finally:
            server.should_exit = True
    print(f"\n{'runs':>8}  {'page':<28} {'median ms':>10} {'max ms':>8}")
    for size, page, median, worst in rows:
        print(f"{size:>8}  {page:<28} {median:>10.1f} {worst:>8.1f}")


if __name__ == "__main__":
    main()
