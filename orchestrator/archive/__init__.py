"""Vault archives: a vault's skill folders and its PostgreSQL history in one .tar.gz.

Layout inside the archive (JSON only, never pickle):

    skillq-archive/manifest.json          format, source vault, when, row counts per table
    skillq-archive/vault/<skill>/...      every skill folder, and .deleted/ (soft-deleted)
    skillq-archive/records/<table>.jsonl  one JSON object per row (tables.py says which)

Export is orchestrator/archive/writer.py, import orchestrator/archive/restore.py.
"""

FORMAT = 1
ROOT = "skillq-archive"
