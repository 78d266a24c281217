"""The local API: a running stack's small HTTP service that submits and follows runs.

`skillq run` started cold spends most of its time importing Celery, SQLAlchemy, psycopg
and the vault code before it submits anything. A stack that is already up has all of that
loaded, so `skillq up` also starts this service (127.0.0.1 only, a bearer token from
SKILLQ_HOME/api.json), and `skillq run` becomes a thin client of it when it answers
(orchestrator/cli/run_client.py), as Prefect's client talks to its server.

Modules: ``apifile`` (api.json, stdlib only: the thin client reads it), ``guard`` (Host
and token), ``runs`` (submit, follow, cancel: the CLI's own code), ``run_ends`` (one
LISTEN connection waking long-polls), ``app`` (the routes), ``server`` (bind, serve).
"""
