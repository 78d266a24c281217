"""Celery tasks of the control plane: advancing pipelines."""

from __future__ import annotations
