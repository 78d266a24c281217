"""The numbers an eval reports (issue 45), pure: pass@k and pass^k from n runs of which c
passed, a mean with its spread, and a 95% interval on a difference against a baseline.

- pass@k, the chance that at least one of k runs passes, estimated without bias as
  1 - C(n-c, k) / C(n, k) (Chen et al. 2021, "Evaluating Large Language Models Trained
  on Code");
- pass^k, the chance that all k runs pass, estimated as C(c, k) / C(n, k) (tau-bench);
- a difference of pass rates by Newcombe's hybrid score interval (Wilson intervals of
  each rate, combined), which holds at 0 and n passes where a Wald interval does not;
- a difference of means (duration, tokens, cost) by Welch's t interval, for groups whose
  spreads differ.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Z95 = 1.959963984540054  # the standard normal's 97.5% point: a two-sided 95% interval
# Student's t 97.5% points for 1..30 degrees of freedom; past 30, the normal's is within 4%
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201,
         2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069,
         2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def _checked(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n:
        raise ValueError(f"{c} passes of {n} runs: passes must be between 0 and the runs")
    if not 1 <= k <= n:
        raise ValueError(f"k={k} with {n} runs: k must be between 1 and the runs")


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate that at least one of k runs passes."""
    _checked(n, c, k)
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """The estimate that all k runs pass (pass^k)."""
    _checked(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


@dataclass(frozen=True, slots=True)
class Spread:
    """A mean and its sample standard deviation (0 for fewer than two values)."""

    n: int
    mean: float
    stddev: float

    def __str__(self) -> str:
        return f"{self.mean:.4g} ± {self.stddev:.2g}"


def spread(values: Sequence[float]) -> Spread:
    if not values:
        raise ValueError("no values to summarize")
    n = len(values)
    mean = math.fsum(values) / n
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return Spread(n, mean, math.sqrt(var))


@dataclass(frozen=True, slots=True)
class Interval:
    """A difference (this minus the baseline) and its 95% interval."""

    difference: float
    low: float
    high: float

    @property
    def excludes_zero(self) -> bool:
        """Whether the difference is told apart from none at this level."""
        return self.low > 0 or self.high < 0


def wilson(c: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a rate of c in n."""
    if n <= 0:
        raise ValueError("a rate needs at least one run")
    p = c / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def rate_difference(c1: int, n1: int, c2: int, n2: int) -> Interval:
    """c1/n1 - c2/n2 with Newcombe's hybrid score interval (his method 10)."""
    p1, p2 = c1 / n1, c2 / n2
    l1, u1 = wilson(c1, n1)
    l2, u2 = wilson(c2, n2)
    d = p1 - p2
    low = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return Interval(d, max(-1.0, low), min(1.0, high))


def t975(df: float) -> float:
    """Student's t 97.5% point for ``df`` degrees of freedom (rounded down)."""
    whole = max(1, math.floor(df))
    return _T975[whole - 1] if whole <= len(_T975) else Z95


def mean_difference(values: Sequence[float], baseline: Sequence[float]) -> Interval:
    """mean(values) - mean(baseline) with Welch's t interval; a group of one run has no
    spread of its own, so its interval is the other group's alone (or none at all)."""
    a, b = spread(values), spread(baseline)
    d = a.mean - b.mean
    va, vb = a.stddev ** 2 / a.n, b.stddev ** 2 / b.n
    se = math.sqrt(va + vb)
    if se == 0:
        return Interval(d, d, d)
    parts = [v * v / (g.n - 1) for v, g in ((va, a), (vb, b)) if g.n > 1]
    df = (va + vb) ** 2 / math.fsum(parts) if parts and math.fsum(parts) > 0 else 1.0
    half = t975(df) * se
    return Interval(d, d - half, d + half)
