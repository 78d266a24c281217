"""The embedded stack's footprint and cold start, as a laptop user meets them.

    .venv/bin/python benchmarks/stack_footprint.py [--runs N] [--keep]

  rest     `skillq up --vault examples/git-digest` in a fresh SKILLQ_HOME, then every
           process of the stack (Redis, PostgreSQL and its backends, the workers and
           their pool processes, the local API): how many, their RSS summed and their
           PSS summed (shared pages counted once: what the machine actually spends).
           Target (issue 16): <= 500 MB resident at rest.
  cold     `skillq run git-digest` of the offline example (the README's main job) from
           a stopped stack (`skillq down` between runs, servers' data kept: a user's
           second day), wall time, median of N (default 3); floor: the same command on
           the running stack it leaves behind. Target: <= 3 s wall.

Results: a table, and benchmarks/results/footprint-<date>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
SKILLQ = str(Path(sys.executable).with_name("skillq"))
REST_TARGET_MB = 500.0
COLD_TARGET_S = 3.0


def skillq(args: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run([SKILLQ, *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=300, check=False)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"skillq {' '.join(args)} exited {done.returncode}:\n"
                         f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return took


def _kb(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def stack_pids(home: Path) -> list[int]:
    """Every live process whose environment names this SKILLQ_HOME or whose command line
    or working directory is under it (the embedded servers run in their data folders)."""
    found = []
    mark = str(home)
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = str((proc / "cwd").readlink())
            env = (proc / "environ").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if mark in cmd or cwd.startswith(mark) or f"SKILLQ_HOME={mark}\0" in env:
            found.append(int(proc.name))
    return [p for p in found if p != os.getpid()]


def footprint(home: Path) -> dict[str, Any]:
    pids = stack_pids(home)
    return {"processes": len(pids),
            "rss_mb": round(sum(_kb(p, "Rss") for p in pids) / 1024, 1),
            "pss_mb": round(sum(_kb(p, "Pss") for p in pids) / 1024, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    started = datetime.now()
    work = Path(tempfile.mkdtemp(prefix="skillq-footprint-"))
    home, vault, out = work / "home", work / "vault", work / "digest"
    shutil.copytree(ROOT / "examples" / "git-digest", vault)
    out.mkdir(mode=0o777)
    out.chmod(0o777)
    env = {k: v for k, v in os.environ.items()
           if k not in ("SKILLQ_BROKER_URL", "SKILLQ_DATABASE_URL", "SKILLQ_RESULT_BACKEND")}
    env.update(SKILLQ_HOME=str(home), SKILLQ_VAULT=str(vault), SKILLQ_STEP_BINDS=str(out))
    run = ["run", "git-digest", "--input", f"repos={ROOT}", "--input", "title=bench",
           "--input", f"output_dir={out}"]
    result: dict[str, Any] = {"benchmark": "footprint", "started": started.isoformat(),
                              "host": socket.gethostname(), "cpus": os.cpu_count(),
                              "load_avg_before": os.getloadavg()}
    try:
        result["up_s"] = round(skillq(["up"], env, work), 2)
        time.sleep(3)  # the workers' first heartbeats and announcements settle
        result["rest"] = footprint(home)
        skillq(run, env, work)  # the first run pays for what any first run pays for
        result["after_run"] = footprint(home)
        warm = [skillq(run, env, work) for _ in range(args.runs)]
        cold = []
        for _ in range(args.runs):
            skillq(["down"], env, work)
            cold.append(skillq(run, env, work))
        result["cold_s"] = {"samples": [round(s, 3) for s in cold],
                            "median": round(statistics.median(cold), 3)}
        result["warm_s"] = {"samples": [round(s, 3) for s in warm],
                            "median": round(statistics.median(warm), 3)}
        result["cold_ratio_to_warm"] = round(statistics.median(cold) /
                                             statistics.median(warm), 2)
        result["load_avg_after"] = os.getloadavg()
        result["targets"] = {
            "rest_mb": {"target": REST_TARGET_MB, "pss": result["rest"]["pss_mb"],
                        "met": result["rest"]["pss_mb"] <= REST_TARGET_MB},
            "cold_s": {"target": COLD_TARGET_S, "median": result["cold_s"]["median"],
                       "met": result["cold_s"]["median"] <= COLD_TARGET_S}}
    finally:
        subprocess.run([SKILLQ, "down"], env=env, cwd=work, capture_output=True, check=False,
                       timeout=120)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"footprint-{started:%Y-%m-%d-%H%M%S}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(f"results: {path}", file=sys.stderr)
    return 0 if all(t["met"] for t in result["targets"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
