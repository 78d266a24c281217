"""The skill library: what a user decides about the skills of a vault.

Enable and disable, labels, pins, soft delete with the dependents check, the built-in
default skills, and the run-history boundaries of deleted skills. State lives in
PostgreSQL (shared/db/library_models.py); repository functions take the session and the
caller owns the transaction, so the dashboard reuses them as they are.
"""
