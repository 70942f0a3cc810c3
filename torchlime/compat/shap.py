"""shap's ``KernelExplainer`` on torchlime's engine: switching is one import line.

``from torchlime.compat.shap import KernelExplainer`` takes shap's constructor (``model``, ``data``,
``feature_names``, ``link``) and ``shap_values(X, nsamples=..., l1_reg=..., silent=...)`` / ``__call__``
/ ``explain``, and returns shap's shapes and types: a float64 (n, P) array for a model of one output,
(n, P, K) for K outputs, (P,) / (P, K) for one row; ``expected_value`` a float or a (K,) array;
``__call__`` a ``shap.Explanation`` that shap's plots take (shap needed for that one only).

The estimator is shap's KernelSHAP: features equal (``np.allclose``) to every background row get 0,
the coalitions of the M others are shap's design (``nsamples="auto"`` = 2M + 2048; every coalition, so
the exact Shapley values, when 2^M - 2 fit; the subset sizes that fit enumerated, the rest drawn), a
hidden feature takes each background row's value and the model's output is averaged over the
background (weighted for ``shap.kmeans`` summaries), the link is applied to that mean, ``l1_reg``
selects features as shap does, and the values are the weighted least squares fit whose sum is pinned
to link(f(x)) - link(E[f(background)]). What is torchlime's: every coalition of every row of ``X`` x
every background row goes through the model in chunked batched calls (``batch_size`` coalitions per
call, each N rows), only one chunk of (coalitions x background rows) exists at a time, the design is
built on whole arrays and every row's fit is solved at once. A torch module is called with tensors on
its own device (the engine's chunk rule; a device out-of-memory error halves the chunk). A numpy model
(scikit-learn's ``predict_proba``) gets numpy rows built, run and averaged with numpy, in chunks whose
size is timed during the call (``_shap_host``): the fastest is the model's and the machine's. The drawn
coalitions are torchlime's draws of shap's distribution, from ``seed`` (or ``random_state``), else from
numpy's global generator, so ``np.random.seed`` repeats a run.
"""

from __future__ import annotations

import time
import warnings
from typing import Callable, Optional, Union, cast

import numpy as np
import torch

from torchlime._util.checks import describe
from torchlime.compat import _shap_args as checks
from torchlime.compat import _shap_design as design
from torchlime.compat._shap_args import Seed
from torchlime.compat._shap_data import (
    ModelCall,
    Rows,
    apply_link,
    background,
    explained_rows,
    link_name,
    placement,
)
from torchlime.compat._shap_fit import Rule, augmented, sklearn_select, solve
from torchlime.compat._shap_host import ChunkTuner, host_means
from torchlime.engine.sizes import check_sizes
from torchlime.stages.forward.chunking import ChunkPlan, check_batch_size, check_max_memory, cpu_rule
from torchlime.stages.forward.model import eval_mode
from torchlime.stages.forward.passes import run_rows
from torchlime.stages.lars import lars_path
from torchlime.typing import BatchSize, MemorySpec

__all__ = ["KernelExplainer"]

_BLOCK_ELEMENTS = 2**23  # bound on rows of X x draws x features held by the design of one block
_KEYWORDS = ("keep_index", "keep_index_ordered", "random_state", "nsamples", "l1_reg")


class KernelExplainer:
    """shap's ``KernelExplainer(model, data, feature_names=None, link="identity", **kwargs)``, batched.

    Args:
        model: callable on (n, P) rows returning (n,) or (n, K) scores: numpy rows (as shap calls it), or
            tensors for a torch ``nn.Module`` (on its device) or when ``data`` is a tensor.
        data: (N, P) background rows: numpy array, pandas DataFrame, torch tensor or shap's ``DenseData``
            (``shap.kmeans`` / ``shap.sample``: its weights are used).
        feature_names: names of the P columns (default: a DataFrame's columns), for ``__call__``.
        link: "identity" or "logit" (or shap's ``IdentityLink()`` / ``LogitLink()``).
        seed: the drawn coalitions' seed (int, or a numpy RandomState / Generator); None: numpy's global
            generator (``np.random.seed`` repeats a run).
        batch_size: coalitions per model call (each N background rows); None: the engine's chunk rule for
            a torch model, its CPU rule (16 MiB of rows a call) for a numpy one; "measure": sizes timed
            during the first calls (``_shap_host.ChunkTuner``: faster, but a model whose arithmetic depends on
            the batch may then give other last bits from call to call).
        max_memory: CUDA memory budget of a chunk (bytes, or a fraction of the device's memory).
        kwargs: shap's ``keep_index`` (the model gets DataFrames with ``data``'s columns),
            ``keep_index_ordered`` (no effect), ``random_state`` (``seed``'s other name), and ``nsamples`` /
            ``l1_reg``: the defaults of ``shap_values`` and ``__call__`` (shap 0.51 ignores these two).

    Raises:
        TypeError / ValueError: a model that is not callable, bad ``data``, ``link``, ``seed`` or keywords.

    Example:
        >>> f = lambda x: x[:, 0] + 2 * x[:, 1]
        >>> explainer = KernelExplainer(f, np.zeros((1, 3)))
        >>> explainer.shap_values(np.array([[1.0, 1.0, 1.0]]), silent=True).round(6).tolist()
        [[1.0, 2.0, 0.0]]
    """

    def __init__(
        self,
        model: Callable[..., object],
        data: object,
        feature_names: Optional[list[str]] = None,
        link: object = "identity",
        *,
        seed: Seed = None,
        batch_size: BatchSize = None,
        max_memory: MemorySpec = None,
        **kwargs: object,
    ) -> None:
        unknown = sorted(set(kwargs) - set(_KEYWORDS))
        if unknown:
            raise TypeError(f"KernelExplainer got unexpected keyword argument(s) {unknown}; it takes {list(_KEYWORDS)}")
        if kwargs.get("random_state") is not None:
            if seed is not None:
                raise TypeError("pass `seed` or `random_state`, not both")
            checks.check_seed(kwargs["random_state"])
            seed = cast(Seed, kwargs["random_state"])
        checks.check_seed(seed)
        self.seed = seed
        self.nsamples: object = kwargs.get("nsamples", "auto")
        self.l1_reg: object = kwargs.get("l1_reg", "num_features(10)")
        checks.count(self.nsamples)
        checks.rule(self.l1_reg)
        self.link = link_name(link)
        self.batch_size = check_batch_size(batch_size)
        self.max_memory = check_max_memory(max_memory)
        bg = background(data)
        self.model = model
        self.data: Rows = bg.values
        if feature_names is not None:
            self.data_feature_names = [str(n) for n in feature_names]
        elif bg.names is not None:
            self.data_feature_names = bg.names
        tensors, self._device, self._dtype = placement(model, bg.values)
        values = bg.values if isinstance(bg.values, torch.Tensor) else torch.from_numpy(np.array(bg.values))
        self._bg = values.to(self._device, self._dtype)
        self.N, self.P = self._bg.shape
        weights = torch.from_numpy(bg.weights).to(self._device)
        columns = bg.names if kwargs.get("keep_index", False) else None
        self._call = ModelCall(model, tensors, weights, columns)
        self._tuner: Optional[ChunkTuner] = None  # coalitions per call of a numpy model, timed over the calls
        scores = self._forward(lambda a, b: self._bg[a:b], self.N, (self.P,), False)
        self._fnull = (scores * weights.unsqueeze(1)).sum(0)  # (K,) float64 on the device
        self.fnull: np.ndarray = self._fnull.cpu().numpy()  # E[f(background)] per output, as shap's
        self.vector_out = self._call.ndim != 1
        self.D = int(self._fnull.shape[0])
        linked = apply_link(self.link, self._fnull).cpu().numpy()
        self.expected_value: Union[float, np.ndarray] = linked if self.vector_out else float(linked[0])

    # ------------------------------------------------------------------ shap's API
    def shap_values(
        self,
        X: object,
        nsamples: object = None,
        l1_reg: object = None,
        silent: bool = False,
        gc_collect: bool = False,
        seed: Seed = None,
    ) -> np.ndarray:
        """SHAP values of the rows of ``X``, in shap's shapes.

        Args:
            X: (n, P) rows (numpy, DataFrame, tensor) or one (P,) row (a Series, a 1-D array).
            nsamples: "auto" (2M + 2048) or an int, model evaluations (coalitions) per row; None: the
                constructor's (default "auto").
            l1_reg: "num_features(k)", "aic", "bic", "auto" (deprecated, as in shap: "aic" when under 20% of
                the coalitions are evaluated), False, or a Lasso alpha; None: the constructor's (default
                "num_features(10)", shap's).
            silent: no progress bar (shown for 2-D ``X`` otherwise, as shap does).
            gc_collect: taken for shap's signature (no effect).
            seed: this call's seed (overrides the constructor's).

        Returns:
            Float64 (n, P) for a model of one output, (n, P, K) for K outputs ((P,) / (P, K) for one row).

        Raises:
            TypeError / ValueError: bad ``X``, ``nsamples``, ``l1_reg`` or ``seed``; a model output of another
                width than on the background, or not finite.
        """
        count = checks.count(self.nsamples if nsamples is None else nsamples)
        rule = checks.rule(self.l1_reg if l1_reg is None else l1_reg)
        rows, single, _ = explained_rows(X, self.P)
        generator = torch.Generator().manual_seed(checks.seed_value(self.seed if seed is None else seed))
        if rule == "auto":
            warnings.warn("l1_reg='auto' is deprecated (as in shap)", DeprecationWarning, stacklevel=2)
        x = (rows if isinstance(rows, torch.Tensor) else torch.from_numpy(np.array(rows))).to(self._device, self._dtype)
        asked = 2 * self.P + 2**11 if count is None else count
        draws = design.effective_nsamples(asked, self.P)[0] + 2  # the row, the empty coalition and the samples
        block = max(1, _BLOCK_ELEMENTS // (4 * draws * max(self.P, 1)))
        # a block's coalitions (b, draws, P), weights, outputs (b, draws, D) and fit, refused before any is built
        b, p = min(block, x.shape[0]), self.P
        check_sizes(
            b, draws, p, self.D, device=x.device, keep_samples=True, score_bytes=8, argument="nsamples", value=asked
        )
        parts = [torch.zeros(0, self.D, self.P, dtype=torch.float64, device=self._device)]
        for start in range(0, x.shape[0], block):  # blocks of rows bound the design's memory
            parts.append(self._explain(x[start : start + block], count, rule, generator, not silent and not single))
        phi = torch.cat(parts).transpose(1, 2).cpu().numpy()  # (n, P, K)
        if not self.vector_out:
            phi = phi[..., 0]
        return phi[0] if single else phi

    def explain(
        self, incoming_instance: object, nsamples: object = None, l1_reg: object = None, seed: Seed = None
    ) -> np.ndarray:
        """The values (shap's ``explain``) of one (1, P) row as (P,), or (P, K).

        Args:
            incoming_instance: (1, P) or (P,) one row.
            nsamples: as ``shap_values``.
            l1_reg: as ``shap_values``.
            seed: as ``shap_values``.

        Returns:
            Float64 (P,) or (P, K).
        """
        rows, _, _ = explained_rows(incoming_instance, self.P)
        out: np.ndarray = self.shap_values(rows[:1], nsamples, l1_reg, silent=True, seed=seed)[0]
        return out

    def __call__(
        self, X: object, l1_reg: object = None, silent: bool = False, nsamples: object = None, seed: Seed = None
    ) -> object:
        """A ``shap.Explanation`` (shap's ``explainer(X)``) (values, base_values, data, feature_names).

        Args:
            X: (n, P) rows or one (P,) row, as ``shap_values`` takes them.
            l1_reg: as ``shap_values``.
            silent: as ``shap_values``.
            nsamples: as ``shap_values``.
            seed: as ``shap_values``.

        Returns:
            ``shap.Explanation`` (values as ``shap_values``; base_values the expected value per row).

        Raises:
            ImportError: without shap (``pip install shap``).
        """
        try:
            import shap
        except ImportError as err:
            raise ImportError(
                "KernelExplainer(...)(X) returns a shap.Explanation and needs shap: pip install shap "
                "(shap_values(X) works without it)"
            ) from err
        started = time.time()
        names = explained_rows(X, self.P)[2] or getattr(self, "data_feature_names", None)
        values = self.shap_values(X, nsamples, l1_reg, silent=silent, seed=seed)
        ev = self.expected_value
        base = np.tile(ev, (values.shape[0], 1)) if isinstance(ev, np.ndarray) else np.tile(ev, values.shape[0])
        if isinstance(X, torch.Tensor):
            data: object = X.detach().cpu().numpy()
        else:
            data = X.to_numpy() if hasattr(X, "columns") and hasattr(X, "to_numpy") else X
        explanation: object = shap.Explanation(
            values, base_values=base, data=data, feature_names=names, compute_time=time.time() - started
        )
        return explanation

    # ------------------------------------------------------------------ the work
    def _forward(
        self, build: Callable[[int, int], torch.Tensor], n_rows: int, row: tuple[int, ...], progress: bool
    ) -> torch.Tensor:
        """Float64 (n_rows, K) scores of rows ``build(start, stop)``, in the engine's chunks."""
        parts: list[torch.Tensor] = []

        def consume(out: object, chunk: object, start: int, stop: int) -> None:
            assert isinstance(out, torch.Tensor)
            parts.append(out)

        signature = (row, str(self._dtype), "shap")
        plan = ChunkPlan(self._call, signature, self._device, self.batch_size, self.max_memory)
        with eval_mode(self.model):
            run_rows(self._call, build, consume, n_rows, plan, self._device, self._dtype, progress)
        empty = torch.zeros(0, getattr(self, "D", 1), dtype=torch.float64, device=self._device)
        out = torch.cat(parts) if parts else empty
        if getattr(self, "D", out.shape[1]) != out.shape[1] or not bool(torch.isfinite(out).all()):
            raise ValueError(
                f"`model` must return {getattr(self, 'D', '')} finite value(s) per row (as on the background "
                f"data), got {describe(out)} with {int((~torch.isfinite(out)).sum())} non-finite"
            )
        return out

    def _explain(
        self, x: torch.Tensor, count: Optional[int], rule: Union[Rule, str], generator: torch.Generator, progress: bool
    ) -> torch.Tensor:
        """Float64 (B, K, P) values of a block of rows x (B, P)."""
        b, p, dev = x.shape[0], self.P, self._device
        fx = self._forward(lambda i, j: x[i:j], b, (p,), False)
        if x.is_floating_point():
            # numpy's isclose(equal_nan=True) written out: torch.isclose does not broadcast its inputs on CUDA
            a, bg = x.unsqueeze(1), self._bg.unsqueeze(0)
            same = (a == bg) | (a.isnan() & bg.isnan()) | ((a - bg).abs() <= 1e-8 + 1e-5 * bg.abs())
        else:
            same = x.unsqueeze(1) == self._bg.unsqueeze(0)
        varying = ~same.all(1)  # (B, P): the features shap explains
        m = varying.sum(1).cpu()
        asked = {int(v): 2 * int(v) + 2**11 if count is None else count for v in set(m.tolist())}
        plans = {v: design.plan(v, asked[v]) for v in asked if v >= 2}
        width = max([q.samples for q in plans.values()], default=0)
        # the design on the host, in numpy (single-threaded: no parallel torch operation to wait for)
        zs, ws = np.zeros((b, 2 + width, p), dtype=bool), np.zeros((b, 2 + width), dtype=np.float64)
        zs[:, 0] = True  # row 0: the row itself; row 1: every feature hidden (weights 0: the constraints)
        samples, fraction = torch.zeros(b, dtype=torch.long), torch.ones(b, dtype=torch.float64)
        vary, counts = varying.cpu().numpy(), m.numpy()
        for v, q in plans.items():  # one array per group of rows with the same number of varying features
            idx = np.flatnonzero(counts == v)
            masks, weights = design.design(q, idx.size, generator)
            cols = np.broadcast_to(np.nonzero(vary[idx])[1].reshape(idx.size, 1, v), masks.shape)
            full = np.zeros((idx.size, q.samples, p), dtype=bool)
            np.put_along_axis(full, cols, masks.numpy(), 2)
            zs[idx, 2 : 2 + q.samples], ws[idx, 2 : 2 + q.samples] = full, weights.numpy()
            samples[idx] = q.samples
            fraction[idx] = q.samples / design.effective_nsamples(asked[v], v)[1]
        kept = np.nonzero(ws > 0)  # (row, coalition) of every coalition the model sees
        z, w = torch.from_numpy(zs).to(dev), torch.from_numpy(ws).to(dev)
        if self._call.tensors:
            rb, rs = (torch.from_numpy(i).to(dev) for i in kept)
            bg = self._bg.unsqueeze(0)

            def build(i: int, j: int) -> torch.Tensor:  # (c, N, P): one chunk of coalitions x background rows
                keep = z[rb[i:j], rs[i:j]].unsqueeze(1)
                return torch.where(keep, x[rb[i:j]].unsqueeze(1), bg)

            ey = torch.zeros(b, 2 + width, self.D, dtype=torch.float64, device=dev)
            ey[rb, rs] = self._forward(build, int(rb.numel()), (self.N, p), progress)
        else:  # numpy rows for a numpy model: built, run and averaged with numpy, in timed chunks
            cap = cpu_rule(((self.N, p), str(self._dtype), "shap"))
            if self.batch_size == "measure":  # timed, going on in this explainer's later calls until chosen
                tuner = self._tuner = self._tuner or ChunkTuner(self.N, cap)
            else:  # fixed: the same chunks on every call, so the same bits whatever the model's arithmetic
                tuner = ChunkTuner(self.N, cap, self.batch_size or cap)
            means = np.zeros((b, 2 + width, self.D), dtype=np.float64)
            rows, bg_rows = x.numpy(), self._bg.numpy()
            means[kept] = host_means(self._call, rows, bg_rows, zs[kept], kept[0], tuner, self.D, progress)
            ey = torch.from_numpy(means)
        fnull = self._fnull.view(1, 1, -1)
        y = apply_link(self.link, torch.cat((fx.unsqueeze(1), fnull.expand(b, 1, -1), ey[:, 2:]), 1))
        chosen = self._chosen(rule, z, w, y, varying, m.to(dev), samples.to(dev), fraction.to(dev))
        return solve(z, w, y, varying, chosen)

    def _chosen(
        self,
        rule: Union[Rule, str],
        z: torch.Tensor,
        w: torch.Tensor,
        y: torch.Tensor,
        varying: torch.Tensor,
        m: torch.Tensor,
        samples: torch.Tensor,
        fraction: torch.Tensor,
    ) -> Optional[torch.Tensor]:
        """Bool (B, K, P) the features ``l1_reg`` keeps (None: every varying one)."""
        if rule is False:
            return None
        use = m >= 2  # shap selects only among 2 or more varying features
        if rule == "auto":
            rule, use = "aic", use & (fraction < 0.2)
        chosen = varying.unsqueeze(1).expand(-1, y.shape[2], -1).clone()
        idx = use.nonzero().flatten()
        if idx.numel() == 0:
            return chosen
        target = y[idx] - y[idx, 1:2]
        gap = y[idx, 0] - y[idx, 1]
        if isinstance(rule, tuple):
            gram, cov = augmented(z[idx], w[idx], target, gap, varying[idx])
            rows = 2 * samples[idx]  # the augmented problem's rows: lars_path's n
            chosen[idx] = lars_path(gram, cov.transpose(1, 2), varying[idx], rows, method="lar", max_iter=rule[1])
        else:
            assert not isinstance(rule, bool)
            chosen[idx] = sklearn_select(rule, z[idx], w[idx], target, gap, varying[idx], samples[idx])
        return chosen
