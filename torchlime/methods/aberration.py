"""Nested two-level mask designs of small aberration: the columns of ``designs.FactorialSampler``.

A two-level design gives feature j of sample s the parity of ``s & c_j`` (compared with a random bit per
input and feature, a digital shift): the first 2^k samples are the regular fractional factorial whose
columns are the c_j truncated to k bits. Its error is aliasing: w columns whose XOR is 0 at level k (a word
of length w) make each of their main effects indistinguishable from the (w - 1)-factor interaction of the
others; the word-length pattern A_w(k) counts the words. Sobol's leading bits (``SobolSampler``) are such
columns, chosen for uniformity rather than for short words.

``build_columns(F)`` sets bit 0 of every column (a fold-over: no word of odd length at any level, so no
main effect is aliased with a two-factor interaction), then chooses bits 1, 2, ... one row at a time: row
b by a single-flip local search from random rows (``RESTARTS``) that minimises ``Σ_w λ_w A_w(b + 1)`` over
w <= ``WMAX``, with ``λ_w = w ρ^(w-1) + (F - w) ρ^(w+1)`` (the aliased interactions' weight when an effect
of order r shrinks like ρ^r) and repeated columns forbidden. A row that adds no direction to the rows before
it while they span fewer than F features (the search counts no word longer than ``WMAX``, so it can pick
one) is replaced by its cheapest single flip that does (``rank``): the first 2^k samples hold 2^min(k, F)
distinct masks, none drawn twice before all 2^F are. The columns do not depend on N, so any prefix of
samples is the design a call at that N draws. A_w(k) of all levels at once comes from H[r][x], the number
of r-subsets of columns whose XOR is x: adding column c adds H[r - 1][x ^ c] to H[r][x].

``columns(F)`` reads the output for F = 1 .. ``MAX_FEATURES`` from ``aberration_columns.txt`` (made by
``python -m torchlime.methods.aberration``; a test rebuilds some), so no call pays for the search.
"""

from __future__ import annotations

import functools
import random
from pathlib import Path
from typing import Sequence

import numpy as np

#: the bits constructed (the first 2^13 = 8192 samples); higher bits are Sobol's leading bits
BITS = 13
#: the longest words counted
WMAX = 6
#: the decay of interaction effects per order in the word weights
RHO = 0.1
#: the local searches per row, and the sweeps over the columns in each
RESTARTS, SWEEPS = 6, 30
#: the widest call the table covers (wider calls draw Sobol's columns)
MAX_FEATURES = 64

#: the shipped table
TABLE = Path(__file__).with_name("aberration_columns.txt")

__all__ = ["BITS", "MAX_FEATURES", "TABLE", "build_columns", "columns", "rank", "raises_rank", "row_of", "word_lengths"]


def _weights(n_features: int) -> list[float]:
    """λ_w for w = 0 .. WMAX (words of length 1 and 2, zero and repeated columns, forbidden)."""
    lam = [0.0, 1e12, 1e12]
    for w in range(3, WMAX + 1):
        lam.append(w * RHO ** (w - 1) + (n_features - w) * RHO ** (w + 1))
    return lam


def _histogram(cols: Sequence[int], k: int) -> np.ndarray:
    """H (WMAX + 1, 2^k): H[r][x] the number of r-subsets of ``cols`` (k-bit) whose XOR is x."""
    idx = np.arange(1 << k)
    h = np.zeros((WMAX + 1, 1 << k))
    h[0, 0] = 1.0
    for c in cols:
        for r in range(WMAX, 0, -1):  # a fixed loop over word lengths
            h[r] += h[r - 1][idx ^ int(c)]
    return h


def word_lengths(cols: Sequence[int], k: int) -> list[int]:
    """[A_1, ..., A_WMAX] at level k: the words of each length among ``cols`` truncated to k bits.

    Args:
        cols: the columns (ints).
        k: the level (the first 2^k samples).

    Example:
        >>> word_lengths([1, 3, 5, 7], 3)  # 1 ^ 3 ^ 5 ^ 7 = 0: one word of length 4
        [0, 0, 0, 1, 0, 0]
    """
    h = _histogram([c & ((1 << k) - 1) for c in cols], k)
    return [int(round(h[w, 0])) for w in range(1, WMAX + 1)]


def _best_row(cols: np.ndarray, b: int, lam: list[float], rng: random.Random) -> np.ndarray:
    """The columns with bit b chosen by the local search of the module docstring."""
    k, f = b + 1, cols.shape[0]
    idx = np.arange(1 << k)
    best_cost, best = float("inf"), cols
    for _ in range(RESTARTS):
        cv = cols | (np.array([rng.getrandbits(1) for _ in range(f)], dtype=np.int64) << b)
        h = _histogram(cv, k)
        cost = float("inf")
        for _ in range(SWEEPS):
            improved = False
            order = list(range(f))
            rng.shuffle(order)
            for j in order:
                old = int(cv[j])
                for r in range(1, WMAX + 1):  # column j out
                    h[r] -= h[r - 1][idx ^ old]
                new = old ^ (1 << b)
                c_old = sum(lam[w] * (h[w, 0] + h[w - 1, old]) for w in range(1, WMAX + 1))
                c_new = sum(lam[w] * (h[w, 0] + h[w - 1, new]) for w in range(1, WMAX + 1))
                pick = new if c_new < c_old - 1e-12 * abs(c_old) else old
                improved = improved or pick != old
                for r in range(WMAX, 0, -1):  # the chosen column in
                    h[r] += h[r - 1][idx ^ pick]
                cv[j] = pick
                cost = min(c_old, c_new)
            if not improved:
                break
        if cost < best_cost:
            best_cost, best = cost, cv.copy()
    return best


def rank(rows: Sequence[int]) -> int:
    """The rank over GF(2) of bit vectors (ints): 2^rank distinct masks are in the samples these rows index.

    Args:
        rows: the vectors, e.g. bit b of every column as one int (feature j at bit j).

    Example:
        >>> rank([0b011, 0b101, 0b110])  # the third is the XOR of the first two
        2
    """
    basis: list[int] = []
    for r in rows:
        for v in basis:
            r = min(r, r ^ v)
        if r:
            basis.append(r)
    return len(basis)


def row_of(cols: Sequence[int], b: int) -> int:
    """Bit b of every column, as one int (column j at bit j).

    Args:
        cols: the columns (ints).
        b: the bit.
    """
    return sum(((int(c) >> b) & 1) << j for j, c in enumerate(cols))


def raises_rank(rows: Sequence[int], row: int, n_features: int) -> bool:
    """Whether ``row`` adds a new direction to ``rows``, or they span all F features already.

    A row that adds none gives the next 2^b samples the masks of the first 2^b again (a design that stalls).
    """
    return rank([*rows, row]) > rank(rows) or rank(rows) >= n_features


def _independent(cols: np.ndarray, b: int, lam: list[float]) -> np.ndarray:
    """The columns with a bit b that raises the rank: the cheapest single flip of it that does, if it does not."""
    below = [row_of(cols.tolist(), i) for i in range(b)]
    f = cols.shape[0]
    if raises_rank(below, row_of(cols.tolist(), b), f):
        return cols
    best_cost, best = float("inf"), cols
    for j in range(f):  # one flip per feature (one of them raises it: the rows do not span every feature)
        cv = cols.copy()
        cv[j] ^= 1 << b
        if not raises_rank(below, row_of(cv.tolist(), b), f):
            continue
        h = _histogram(cv, b + 1)
        cost = float(sum(lam[w] * h[w, 0] for w in range(1, WMAX + 1)))
        if cost < best_cost:
            best_cost, best = cost, cv
    return best


def build_columns(n_features: int, seed: int = 0) -> tuple[int, ...]:
    """The ``BITS``-bit columns of F features (module docstring); deterministic for a seed.

    Args:
        n_features: F >= 1.
        seed: the local searches' seed.

    Returns:
        F ints below 2^BITS, each odd.
    """
    rng = random.Random(seed)
    lam = _weights(n_features)
    cols = np.ones(n_features, dtype=np.int64)  # bit 0: the fold-over
    for b in range(1, BITS):
        cols = _independent(_best_row(cols, b, lam, rng), b, lam)
    return tuple(int(c) for c in cols)


@functools.lru_cache(maxsize=1)
def _table() -> dict[int, tuple[int, ...]]:
    """F -> columns, read once from ``TABLE`` (lines ``F: hex hex ...``)."""
    out = {}
    for line in TABLE.read_text().splitlines():
        if line and not line.startswith("#"):
            f, cols = line.split(":")
            out[int(f)] = tuple(int(c, 16) for c in cols.split())
    return out


def columns(n_features: int) -> tuple[int, ...]:
    """The shipped columns of F features (``build_columns(F)``), 1 <= F <= ``MAX_FEATURES``.

    Args:
        n_features: F.

    Raises:
        ValueError: F outside 1 .. MAX_FEATURES.

    Example:
        >>> len(columns(16)), all(c % 2 == 1 for c in columns(16))  # one odd column per feature
        (16, True)
    """
    table = _table()
    if n_features not in table:
        raise ValueError(f"`n_features` must be in 1 .. {MAX_FEATURES}, got {n_features}")
    return table[n_features]


def _write(path: Path) -> None:
    """Write the table: the columns of F = 1 .. MAX_FEATURES, hexadecimal, one line per F."""
    head = "# the columns of torchlime.methods.aberration.build_columns(F), F = 1 .. 64, hexadecimal"
    rows = [f"{f}: " + " ".join(format(c, "x") for c in build_columns(f)) for f in range(1, MAX_FEATURES + 1)]
    path.write_text("\n".join([head + " (python -m torchlime.methods.aberration)", *rows]) + "\n")


if __name__ == "__main__":
    _write(TABLE)
