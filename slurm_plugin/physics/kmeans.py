"""One-dimensional k-means with k chosen by silhouette, as PAL classifies GPUs (standard library).

In one dimension every k-means cluster is an interval of the sorted values, so the mean distance
of a point to a cluster comes from prefix sums (O(log n)), and the silhouette of n GPUs costs
O(n k log n) rather than O(n^2). Initial centroids are the k quantile midpoints of the data and
Lloyd's iterations run to a fixed point: the result is deterministic.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

K_MIN, K_MAX = 2, 10


@dataclass(frozen=True, slots=True)
class Clustering:
    centroids: tuple[float, ...]      # ascending
    labels: tuple[int, ...]           # per input value, index into ``centroids``
    silhouette: float                 # mean silhouette (0.0 for k = 1)

    @property
    def k(self) -> int:
        return len(self.centroids)


def kmeans_1d(values: list[float], k: int, max_iter: int = 100) -> Clustering:
    """Lloyd's k-means of ``values`` into at most ``k`` non-empty clusters."""
    if not values:
        raise ValueError("kmeans_1d: no values")
    xs = sorted(values)
    n = len(xs)
    k = max(1, min(k, len(set(xs))))
    cents = [xs[min(n - 1, int((i + 0.5) * n / k))] for i in range(k)]
    cents = sorted(set(cents))
    prefix = _prefix(xs)
    bounds: list[int] = []
    for _ in range(max_iter):
        # boundaries between consecutive centroids split the sorted values into intervals
        cuts = [bisect.bisect_right(xs, (a + b) / 2.0) for a, b in zip(cents, cents[1:])]
        bounds = [0, *cuts, n]
        new = []
        for a, b in zip(bounds, bounds[1:]):
            if b > a:
                new.append((prefix[b] - prefix[a]) / (b - a))
        if new == cents:
            break
        cents = new
    cuts = [bisect.bisect_right(xs, (a + b) / 2.0) for a, b in zip(cents, cents[1:])]
    bounds = [0, *cuts, n]
    sil = _silhouette(xs, prefix, bounds) if len(cents) > 1 else 0.0
    labels = tuple(_label(cents, v) for v in values)
    return Clustering(tuple(cents), labels, sil)


def best_k(values: list[float], k_min: int = K_MIN, k_max: int = K_MAX) -> Clustering:
    """k-means with the k in ``k_min..k_max`` of the highest mean silhouette (the smallest k on a
    tie). Fewer than three distinct values: one cluster."""
    distinct = len(set(values))
    if distinct < 3:
        return kmeans_1d(values, 1 if distinct < 2 else 2)
    best: Clustering | None = None
    for k in range(k_min, min(k_max, distinct - 1) + 1):
        c = kmeans_1d(values, k)
        if best is None or c.silhouette > best.silhouette + 1e-12:
            best = c
    assert best is not None
    return best


def _label(cents: list[float], v: float) -> int:
    i = bisect.bisect_left(cents, v)
    if i == 0:
        return 0
    if i == len(cents):
        return len(cents) - 1
    return i if cents[i] - v < v - cents[i - 1] else i - 1


def _prefix(xs: list[float]) -> list[float]:
    out = [0.0]
    for x in xs:
        out.append(out[-1] + x)
    return out


def _sum_dist(xs: list[float], prefix: list[float], a: int, b: int, v: float) -> float:
    """Sum of |x - v| over xs[a:b] (sorted)."""
    m = bisect.bisect_left(xs, v, a, b)
    below = v * (m - a) - (prefix[m] - prefix[a])
    above = (prefix[b] - prefix[m]) - v * (b - m)
    return below + above


def _silhouette(xs: list[float], prefix: list[float], bounds: list[int]) -> float:
    """Mean silhouette of sorted ``xs`` split into the intervals ``bounds`` (a singleton
    cluster's point scores 0, as scikit-learn)."""
    spans = [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]
    total = 0.0
    for ci, (a, b) in enumerate(spans):
        size = b - a
        for i in range(a, b):
            if size == 1:
                continue
            v = xs[i]
            intra = _sum_dist(xs, prefix, a, b, v) / (size - 1)
            inter = math.inf
            for cj in (ci - 1, ci + 1):   # in 1-D the nearest other cluster is a neighbour
                if 0 <= cj < len(spans):
                    c, d = spans[cj]
                    inter = min(inter, _sum_dist(xs, prefix, c, d, v) / (d - c))
            den = max(intra, inter)
            total += 0.0 if den == 0 else (inter - intra) / den
    return total / len(xs)
