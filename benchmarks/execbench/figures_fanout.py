"""Figures (b), (c) and (e): fan-outs, the big vault and widths."""

from __future__ import annotations

import time
from collections.abc import Sequence

import raw_tasks

from shared.vault import Vault, load_vault

from .bench import Bench
from .config import (
    PYTHON_ARGV,
    TRUE_ARGV,
)
from .figure import Figure, med

WARM_WIDTH = 50


def fig_fanouts(b: Bench, width: int, reps: int, python: bool) -> list[Figure]:
    out: list[Figure] = []
    pairs = [("b", "fan-cached", b.s.raw, raw_tasks.NOOP, ()),
             ("c", "fan-true", b.s.raw, raw_tasks.SPAWN, (TRUE_ARGV,))]
    if python:
        pairs.append(("c2", "fan-python", b.s.raw, raw_tasks.SPAWN, (PYTHON_ARGV,)))
    times: dict[str, tuple[list[float], list[float]]] = {}
    cpu: dict[str, dict[str, dict[str, float]]] = {}
    for key, skill, app, task, args in pairs:
        sk, raw = [], []
        # Untimed: the skill's history is what sizes its batches (lifecycle/planner.py),
        # as it is for a user's skill after its first runs; a first run goes item by item.
        b.skillq_fan(skill, WARM_WIDTH, f"({key}) warm-up")
        for rep in range(reps):
            label = f"({key}) rep {rep + 1}/{reps}"
            raw.append(b.raw_fan(app, task, args, width, label))
            cpu[key] = {"raw": b.last_cpu}
            sk.append(b.skillq_fan(skill, width, label))
            cpu[key]["skillq"] = b.last_cpu
        times[key] = (sk, raw)
    sk, raw = times["b"]
    tput_sk, tput_raw = width / med(sk), width / med(raw)
    out.append(Figure("b", f"fan-out x{width:,}, cheapest step (cache hit) vs no-op group",
                      tput_sk, tput_raw, "items/s", tput_sk / tput_raw, ">= 0.8x",
                      tput_sk / tput_raw >= 0.8, note=f"median of {reps}; "
                      f"{med(sk):.2f} s vs {med(raw):.2f} s",
                      samples={"skillq_s": sk, "raw_s": raw}))
    sk_c, raw_c = times["c"]
    out.append(Figure("c", f"fan-out x{width:,}, script `true` vs group spawning `true`",
                      med(sk_c), med(raw_c), "s", med(sk_c) / med(raw_c), "<= 1.15x",
                      med(sk_c) / med(raw_c) <= 1.15, note=f"median of {reps}",
                      samples={"skillq_s": sk_c, "raw_s": raw_c}))
    tput_true = width / med(sk_c)
    out.append(Figure("b2", f"fan-out x{width:,}, script `true` vs no-op group", tput_true,
                      tput_raw, "items/s", tput_true / tput_raw,
                      note="the cheapest step that spawns: same runs as (c)"))
    if python:
        sk_p, raw_p = times["c2"]
        out.append(Figure("c2", f"fan-out x{width:,}, `python -I -S -c pass` script vs group",
                          med(sk_p), med(raw_p), "s", med(sk_p) / med(raw_p),
                          note=f"median of {reps}", samples={"skillq_s": sk_p, "raw_s": raw_p}))
    cpu_rows: list[Figure] = []
    for key in cpu:  # CPU seconds of the last repetition, by process group
        sk_cpu, raw_cpu = cpu[key]["skillq"], cpu[key]["raw"]
        split = "; ".join(f"{side}: " + ", ".join(f"{k} {v:.1f}" for k, v in used.items())
                          for side, used in (("skillq", sk_cpu), ("raw", raw_cpu)))
        total_sk, total_raw = sum(sk_cpu.values()), sum(raw_cpu.values())
        cpu_rows.append(Figure(f"{key}-cpu", f"CPU seconds, x{width:,} fan-out of ({key})",
                               total_sk, total_raw, "s", total_sk / max(total_raw, 1e-9),
                               note=split, samples=cpu[key]))
    return out + cpu_rows


def fig_strict_fan(b: Bench, width: int, reps: int) -> Figure:
    strict, plain = [], []
    cpu: dict[str, dict[str, float]] = {}
    for rep in range(reps):
        plain.append(b.raw_fan(b.s.raw, raw_tasks.NOOP, (), width, f"strict rep {rep + 1}"))
        cpu["raw"] = b.last_cpu
        strict.append(b.raw_fan(b.s.strict, raw_tasks.NOOP, (), width,
                                f"strict rep {rep + 1}"))
        cpu["strict"] = b.last_cpu
    t_s, t_p = width / med(strict), width / med(plain)
    cpu_note = "; ".join(f"{side}: " + ", ".join(f"{k} {v:.1f}" for k, v in used.items())
                         for side, used in cpu.items())
    return Figure("b3", f"no-op group x{width:,}, raw Celery with skillq's Celery settings",
                  t_s, t_p, "items/s", t_s / t_p,
                  note="attribution: acks_late, prefetch 1, events, track_started; CPU s "
                  + cpu_note, samples={"strict_s": strict, "raw_s": plain, "cpu_s": cpu})


def fig_big_vault(b: Bench, big: Vault, width: int, reps: int) -> Figure:
    small, large = [], []
    for rep in range(reps):
        small.append(b.skillq_fan("fan-cached", width, f"(b-vault) rep {rep + 1}"))
        large.append(b.skillq_fan("fan-cached", width, f"(b-vault) rep {rep + 1}", big))
    t_large, t_small = width / med(large), width / med(small)
    t0 = time.perf_counter()
    load_vault(big.root)
    load_s = time.perf_counter() - t0
    return Figure("b-vault", f"fan-out x{width:,} (cache hits) in a vault of "
                  f"{len(big.skills):,} skills vs {len(b.s.vault.skills)}", t_large, t_small,
                  "items/s", t_large / t_small,
                  note=f"raw column: the small vault. load_vault takes {load_s:.2f} s here; "
                  "every pool child reloads the whole vault when its 5 s discovery TTL "
                  "expires (open_vault in attempt_skill.skill_for)",
                  samples={"small_s": small, "large_s": large, "load_vault_s": load_s})


def fig_widths(b: Bench, widths: Sequence[int]) -> list[Figure]:
    reps = {1: 25, 10: 25, 100: 5}  # small widths: small totals, so more samples
    totals: dict[int, tuple[float, float]] = {}
    b.skillq_fan("fan-cached", WARM_WIDTH, "(e) warm-up")  # as in fig_fanouts
    for width in (1, *widths):
        sk, raw = [], []
        for rep in range(reps.get(width, 1)):
            label = f"(e) width {width:,} rep {rep + 1}"
            raw.append(b.raw_fan(b.s.raw, raw_tasks.NOOP, (), width, label))
            sk.append(b.skillq_fan("fan-cached", width, label))
        totals[width] = (med(sk), med(raw))
    fixed_sk, fixed_raw = totals[1]
    marginal = {w: ((totals[w][0] - fixed_sk) / (w - 1) * 1000,
                    (totals[w][1] - fixed_raw) / (w - 1) * 1000) for w in widths}
    middle = med([m[0] for m in marginal.values()])
    middle_raw = med([m[1] for m in marginal.values()])
    out = []
    for w in widths:
        m_sk, m_raw = marginal[w]
        off, off_raw = m_sk / middle - 1, m_raw / middle_raw - 1
        out.append(Figure(
            f"e{w}", f"width {w:,}: marginal ms per item (cache-hit fan-out)", m_sk, m_raw,
            "ms/item", m_sk / m_raw, "+-20% of median", abs(off) <= 0.2,
            note=f"{off:+.0%} vs median {middle:.2f} (raw {off_raw:+.0%}); total "
            f"{totals[w][0]:.2f} s vs {totals[w][1]:.2f} s; gross "
            f"{totals[w][0] / w * 1000:.2f} ms/item",
            samples={"skillq_total_s": totals[w][0], "raw_total_s": totals[w][1]}))
    out[0].samples["fixed_s"] = {"skillq": fixed_sk, "raw": fixed_raw}
    return out
