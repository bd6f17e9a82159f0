"""The statistics an experiment reports (issue 34): mean ± sd with a seeded 95% bootstrap
interval per cell, a Wilson interval for rates (pass rates, a reviewer's recall), and the
paired interval of a difference against a baseline. Plain Python, no Django: the numbers are
small (a cell has tasks × repetitions values, a few hundred at most), so a percentile
bootstrap of 2,000 resamples takes milliseconds, and a fixed seed makes every interval the
same on every read."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

RESAMPLES = 2000
SEED = 20261129  # any fixed number: the same data gives the same interval on every read
Z95 = 1.959963984540054  # the 97.5th percentile of the standard normal


@dataclass(frozen=True)
class Summary:
    """What one cell reports for one figure (score, cost, tokens or latency)."""

    n: int
    mean: float | None
    sd: float | None
    low: float | None  # the 95% bootstrap interval of the mean
    high: float | None

    def as_dict(self) -> dict[str, float | int | None]:
        return {"n": self.n, "mean": self.mean, "sd": self.sd, "low": self.low,
                "high": self.high}


EMPTY = Summary(0, None, None, None, None)


def summarize(values: Sequence[float], *, resamples: int = RESAMPLES,
              seed: int = SEED) -> Summary:
    """Mean, sample standard deviation and the 95% percentile-bootstrap interval of the mean.
    No value: nothing to say (never a zero that looks like a measurement). One value: its
    mean, no spread and no interval."""
    xs = [float(v) for v in values]
    if not xs:
        return EMPTY
    mean = statistics.fmean(xs)
    if len(xs) == 1:
        return Summary(1, mean, None, None, None)
    low, high = bootstrap_interval(xs, resamples=resamples, seed=seed)
    return Summary(len(xs), mean, statistics.stdev(xs), low, high)


def bootstrap_interval(xs: Sequence[float], *, resamples: int = RESAMPLES,
                       seed: int = SEED, level: float = 0.95) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of ``xs`` (seeded: reproducible)."""
    n = len(xs)
    if n == 0:
        raise ValueError("no values")
    if min(xs) == max(xs):
        return float(xs[0]), float(xs[0])
    rng = random.Random(seed)  # noqa: S311 -- resampling, not secrecy: seeded on purpose
    means = sorted(sum(rng.choices(xs, k=n)) / n for _ in range(resamples))
    tail = (1 - level) / 2
    return _quantile(means, tail), _quantile(means, 1 - tail)


def _quantile(sorted_xs: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    pos = (len(sorted_xs) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def wilson_interval(successes: int, trials: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion: honest at 0 of n and n of n, where the
    normal approximation collapses to a width of zero. No trial: the whole range."""
    if trials <= 0:
        return 0.0, 1.0
    if not 0 <= successes <= trials:
        raise ValueError(f"{successes} successes in {trials} trials")
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Difference:
    """A figure of this experiment minus the baseline's, paired by task."""

    pairs: int
    mean: float | None
    low: float | None
    high: float | None

    @property
    def excludes_zero(self) -> bool:
        return self.low is not None and self.high is not None and (
            self.low > 0 or self.high < 0)

    def as_dict(self) -> dict[str, float | int | bool | None]:
        return {"pairs": self.pairs, "mean": self.mean, "low": self.low, "high": self.high,
                "excludes_zero": self.excludes_zero}


def paired_difference(ours: dict[str, Sequence[float]], theirs: dict[str, Sequence[float]],
                      *, resamples: int = RESAMPLES, seed: int = SEED) -> Difference:
    """The per-task difference of means (ours − theirs) over the tasks both have, with the
    bootstrap interval of its mean: tasks are the unit resampled, so a hard task that both
    fail does not count as evidence either way. Fewer than two shared tasks: no interval."""
    shared = sorted(k for k in ours.keys() & theirs.keys() if ours[k] and theirs[k])
    diffs = [statistics.fmean(ours[k]) - statistics.fmean(theirs[k]) for k in shared]
    if not diffs:
        return Difference(0, None, None, None)
    mean = statistics.fmean(diffs)
    if len(diffs) == 1:
        return Difference(1, mean, None, None)
    low, high = bootstrap_interval(diffs, resamples=resamples, seed=seed)
    return Difference(len(diffs), mean, low, high)
