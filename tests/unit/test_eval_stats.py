"""An eval's numbers (shared/eval_stats.py): pass@k and pass^k against their definition
counted over every k-subset of the runs, and the intervals against published values."""

from __future__ import annotations

import itertools
import math

import pytest

from shared.eval_stats import (
    mean_difference,
    pass_at_k,
    pass_hat_k,
    rate_difference,
    spread,
    wilson,
)


def subsets(n: int, c: int, k: int) -> tuple[float, float]:
    """The share of k-subsets of n runs (c passing) with some pass, and with all passing."""
    runs = [True] * c + [False] * (n - c)
    chosen = list(itertools.combinations(runs, k))
    return (sum(any(s) for s in chosen) / len(chosen),
            sum(all(s) for s in chosen) / len(chosen))


@pytest.mark.parametrize(("n", "c", "k"), [(n, c, k) for n in (1, 2, 5, 10)
                                          for c in range(n + 1) for k in range(1, n + 1)])
def test_pass_at_k_and_pass_hat_k_are_the_subset_rates(n: int, c: int, k: int) -> None:
    some, every = subsets(n, c, k)
    assert pass_at_k(n, c, k) == pytest.approx(some)
    assert pass_hat_k(n, c, k) == pytest.approx(every)


def test_known_values_and_the_ends() -> None:
    # Chen et al.'s estimator: 10 runs, 3 pass, k=1 is the plain rate
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(10, 3, 5) == pytest.approx(1 - math.comb(7, 5) / math.comb(10, 5))
    assert pass_hat_k(10, 3, 2) == pytest.approx(3 / 45)
    assert (pass_at_k(4, 0, 2), pass_hat_k(4, 4, 4)) == (0.0, 1.0)


@pytest.mark.parametrize(("n", "c", "k"), [(3, 4, 1), (3, -1, 1), (3, 1, 0), (3, 1, 4)])
def test_impossible_counts_are_refused(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_spread_is_the_sample_mean_and_stddev() -> None:
    found = spread([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0])
    assert (found.mean, found.stddev) == (5.0, pytest.approx(2.138, abs=1e-3))
    assert spread([3.0]).stddev == 0.0
    with pytest.raises(ValueError):
        spread([])


def test_rate_difference_matches_newcombes_worked_example() -> None:
    # Newcombe (1998), Statistics in Medicine 17:873, table II, example (a): 56/70 vs
    # 48/80 gives 0.2000 with a 95% interval (0.0524, 0.3339) by method 10
    found = rate_difference(56, 70, 48, 80)
    assert found.difference == pytest.approx(0.2)
    assert (found.low, found.high) == (pytest.approx(0.0524, abs=1e-4),
                                       pytest.approx(0.3339, abs=1e-4))
    assert found.excludes_zero
    # the Wilson interval holds at the ends, where a Wald interval collapses
    assert wilson(0, 10)[0] == 0.0 and wilson(0, 10)[1] > 0.2
    assert not rate_difference(5, 10, 5, 10).excludes_zero


def test_mean_difference_is_welchs_interval() -> None:
    a, b = [10.0, 12.0, 11.0, 13.0, 12.0], [8.0, 9.0, 7.0, 9.0, 8.0, 10.0]
    found = mean_difference(a, b)
    sa, sb = spread(a), spread(b)
    se = math.sqrt(sa.stddev ** 2 / 5 + sb.stddev ** 2 / 6)
    assert found.difference == pytest.approx(sa.mean - sb.mean)
    # Welch-Satterthwaite df is about 8.6 here: t(8) = 2.306
    assert found.high - found.difference == pytest.approx(2.306 * se)
    assert found.excludes_zero
    same = mean_difference([1.0, 1.0], [1.0, 1.0])
    assert (same.low, same.high) == (0.0, 0.0)
