"""The result of an explanation: coefficients per (input, target, feature) and how to read them."""

from __future__ import annotations

import copy
import dataclasses
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Optional, Union

import torch

from torchlime._util.checks import describe
from torchlime._util.plain import plain
from torchlime.engine._stored import Entries, StoredDataError, check_plain
from torchlime.engine.config import Call, Config
from torchlime.engine.info import Info, rebuild
from torchlime.engine.run_record import RunRecord
from torchlime.stages.perturb.record import Perturbation
from torchlime.stages.standard_error import CoefSE
from torchlime.targets.base import Bound
from torchlime.typing import KernelSpec, RankBy, SurrogateSpec

_TENSORS = (
    "coef",
    "intercept",
    "score",
    "local_pred",
    "target",
    "features",
    "n_features",
    "samples",
    "outputs",
    "weights",
    "coef_std",
    "target_valid",
)
_PER_INPUT = tuple(name for name in _TENSORS if name != "features")  # sliced by input (a map may be shared)


@dataclass(eq=False)  # tensors have no single truth value: equality is identity
class Explanation:
    """LIME explanations of B inputs for T targets each.

    Attributes:
        coef: (B, T, F) surrogate coefficients; padded features (f >= F_b) are 0.
        intercept: (B, T) surrogate intercepts.
        score: (B, T) weighted R² of each surrogate; NaN on padded targets (``target_valid``).
        local_pred: (B, T) surrogate prediction at the unperturbed input.
        target: long (B, T) explained output columns.
        features: long (B, *fshape) feature map, ids 0..F_b-1.
        n_features: long (B,) F_b of every input.
        input_shape: shape of one input (without B).
        samples: bool (B, S, F) masks (only with ``return_samples=True``).
        outputs: (B, S, T) model scores of the samples (same condition; float64 for a float64 model's
            plain targets, else float32).
        weights: (B, S) proximity weights (same condition).
        coef_std: (B, T, F) posterior standard deviation of the coefficients (Bayesian
            surrogates such as BayLIME), else None; ``coef_se`` reads the same record.
        coef_se: (property) (B, T, F) the standard error of every coefficient, or None where none is
            computable (``stages.standard_error``: how each surrogate's is computed; ``se_method``);
            computed from ``coef_se_record`` on first access (a call adds no operator for it).
        coef_se_record: the record behind ``coef_se`` (``stages.standard_error.CoefSE``), or None.
        target_valid: bool (B, T): the targets that exist, for structured targets whose count differs
            between inputs (``torchlime.targets``: boxes, regions); padded ones have coefficients 0 and
            ``target`` -1. None: every target is real.
        meta: (read-only property) the records below rendered as plain data, for files and ``repr``;
            code reads the records, and changes a fact by replacing its record (``dataclasses.replace``).
        scorer: a structured target bound to the inputs (``torchlime.targets.Bound``), for the metrics to
            score their rows as the explanation did; not saved, dropped by ``to`` another device.
        config: how it was explained (``engine.config.Config``, the preset's and the modality's
            settings filled in), or None for an explanation loaded from a file.
        call: what was explained in the call (``engine.config.Call``: targets, samples, seed, model
            output, softmax), or None for a loaded one. The metrics read ``softmax`` and ``output``
            from it.
        run: the engine's typed record of the call (``engine.run_record.RunRecord``: settings, chunk
            size, timings, quality flags, a structured target's ``TargetInfo``), which ``meta`` shows as
            plain data; rebuilt by ``load``, sliced by ``explanation[i]``.
        info: the modality's typed record (``engine.info.Info``: segmentation, words, STFT, bins...),
            or None; ``meta[info.key]`` shows it as plain data, which is what files keep.
        perturbation: how the inputs were perturbed (``stages.perturb.record.Perturbation``), for
            metrics that perturb them again; not saved, and dropped by ``to`` another device
            (``run.perturbation`` says whether it was a blend with the fill, which the metrics can
            rebuild, or a front door's own, which they cannot).
        stored: a file's plain entries that no typed record reads back (``load``; entries of other
            versions), read-only, shown in ``meta`` as read; empty for an explanation made in this session.
    """

    coef: torch.Tensor
    intercept: torch.Tensor
    score: torch.Tensor
    local_pred: torch.Tensor
    target: torch.Tensor
    features: torch.Tensor
    n_features: torch.Tensor
    input_shape: tuple[int, ...]
    samples: Optional[torch.Tensor] = None
    outputs: Optional[torch.Tensor] = None
    weights: Optional[torch.Tensor] = None
    coef_std: Optional[torch.Tensor] = None
    target_valid: Optional[torch.Tensor] = None
    coef_se_record: Optional[CoefSE] = field(default=None, repr=False, compare=False)
    perturbation: Optional[Perturbation] = field(default=None, repr=False, compare=False)
    scorer: Optional[Bound] = field(default=None, repr=False, compare=False)
    info: Optional[Info] = field(default=None, repr=False, compare=False)
    run: Optional[RunRecord] = field(default=None, repr=False, compare=False)
    config: Optional[Config] = field(default=None, repr=False, compare=False)
    call: Optional[Call] = field(default=None, repr=False, compare=False)
    stored: Mapping[str, object] = field(default_factory=Entries, repr=False, compare=False)

    @property
    def meta(self) -> Mapping[str, Any]:
        """The records as plain data, read-only (``save`` writes it, ``repr`` shows it; a copy every read).

        ``stored``, then ``run.as_plain()``, then ``info.as_plain()`` under ``info.key`` and ``info.top_level()``.
        """
        plain: dict[str, Any] = dict(self.stored)
        if self.run is not None:
            plain.update(self.run.as_plain())
        if self.info is not None:
            plain[self.info.key] = self.info.as_plain()
            plain.update(self.info.top_level())
        if self.se_method != "none":
            plain["coef_se_method"] = self.se_method
        return MappingProxyType(copy.deepcopy(plain))  # its lists and dicts are copies: the records stay as they are

    @property
    def coef_se(self) -> Optional[torch.Tensor]:
        """(B, T, F) the standard error of every coefficient, or None (see the class docstring)."""
        if self.coef_std is not None:
            return self.coef_std
        return None if self.coef_se_record is None else self.coef_se_record.get()

    @property
    def se_method(self) -> str:
        """How ``coef_se`` is computed (``stages.standard_error.CoefSE.method``).

        One of "sandwich", "design", "kernel_shap", "pairs", "posterior", "bootstrap", "stored" or "none"
        ("pairs": KernelSHAP's paired designs, ``methods.shap_error``).
        """
        if self.coef_std is not None:
            return "posterior"
        return "none" if self.coef_se_record is None else self.coef_se_record.method

    @property
    def valid(self) -> torch.Tensor:
        """Bool (B, F): features that exist for each input."""
        f = self.coef.shape[-1]
        return torch.arange(f, device=self.coef.device) < self.n_features.to(self.coef.device).unsqueeze(1)

    def heatmap(self, target_index: Optional[int] = None) -> torch.Tensor:
        """Coefficients painted back onto the inputs.

        Args:
            target_index: which of the T targets (column of ``target``); None keeps all.

        Returns:
            (B, T, *input_shape), or (B, *input_shape) with ``target_index``.
            Broadcast views over the feature map's broadcast dims (e.g. channels).
        """
        b, t, f = self.coef.shape
        if target_index is not None:
            if isinstance(target_index, bool) or not isinstance(target_index, int):
                raise TypeError(f"`target_index` must be None or an int, got {describe(target_index)}")
            if not -t <= target_index < t:
                raise IndexError(
                    f"`target_index` must be in [0, {t}) for an explanation of {t} target(s) "
                    f"per input, got {target_index}"
                )
        lab = self.features.to(self.coef.device).reshape(b, 1, -1).expand(b, t, -1)
        lab = torch.where(lab < 0, f, lab)  # elements outside every feature get 0
        coef = torch.nn.functional.pad(self.coef, (0, 1))
        maps = coef.gather(2, lab).reshape(b, t, *self.features.shape[1:])
        maps = maps.expand(b, t, *self.input_shape)
        return maps if target_index is None else maps[:, target_index]

    def heatmaps(self, target_index: Optional[int] = None) -> tuple[torch.Tensor, ...]:
        """Coefficients painted back onto each tensor of a tuple of inputs (``run.input_shapes``).

        Args:
            target_index: which of the T targets; None keeps all.

        Returns:
            One map per input tensor: (B, T, *shape_i), or (B, *shape_i) with ``target_index``; for a
            single input tensor, a tuple of its ``heatmap``.
        """
        maps = self.heatmap(target_index)
        shapes = None if self.run is None else self.run.input_shapes
        if shapes is None:
            return (maps,)
        lead = maps.shape[: maps.ndim - 1]
        sizes = [int(torch.Size(shape).numel()) for shape in shapes]
        return tuple(part.reshape(*lead, *shape) for part, shape in zip(torch.split(maps, sizes, dim=-1), shapes))

    def top_features(self, k: int, *, by: RankBy = "abs") -> tuple[torch.Tensor, torch.Tensor]:
        """The k strongest features: the largest |coefficient| (``by="abs"``, the default) or coefficient.

        "Top" means largest |weight| everywhere in torchlime (summaries, the command line, pictures): a
        feature that opposes the target strongly matters as much as one that supports it. The values keep
        their sign, so ``values > 0`` picks the supporting ones. ``by="value"`` ranks by signed
        coefficient instead (the features that support the target most; lime's ``positive_only``);
        ``by="t"`` by |coefficient| / ``coef_se`` (the most certain first; a standard error of 0 ranks
        its nonzero coefficient first, such ties by |coefficient|).

        Args:
            k: how many features (at most F are returned).
            by: "abs" (the largest magnitudes, the default), "value" (the largest coefficients) or "t".

        Returns:
            ``(indices, values)``, each (B, T, k'), k' = min(k, F), strongest first; ``values`` are the
            signed coefficients. Padded features rank last; an invalid target (``target_valid`` False)
            gets indices -1 and values 0.

        Raises:
            ValueError: ``by`` other than "abs", "value" or "t" ("t" without ``coef_se``); ``k`` not a
                positive int.

        Example:
            >>> exp = Explanation(torch.tensor([[[0.5, -2.0, 1.0]]]), torch.zeros(1, 1), torch.ones(1, 1),
            ...                   torch.zeros(1, 1), torch.zeros(1, 1, dtype=torch.long),
            ...                   torch.arange(3).view(1, 3), torch.tensor([3]), (3,))
            >>> exp.top_features(2)[0].tolist(), exp.top_features(2, by="value")[0].tolist()
            ([[[1, 2]]], [[[2, 0]]])
        """
        from torchlime.engine._summary import top_features

        return top_features(self, k, by)

    def to(self, device: Union[str, torch.device]) -> Explanation:
        """A copy with every tensor on ``device``.

        The recorded ``perturbation`` is kept when the device does not change, and dropped when it
        does (it holds the inputs and hooks of the device the explanation ran on).

        Args:
            device: where the tensors go.

        Returns:
            The moved copy.
        """
        moved = {name: getattr(self, name).to(device) for name in _TENSORS if getattr(self, name) is not None}
        same = moved["coef"].device == self.coef.device  # "cuda" and "cuda:0" are one device
        record = self.coef_se_record
        return dataclasses.replace(
            self,
            coef_se_record=None if record is None else record.to(device),
            perturbation=self.perturbation if same else None,
            scorer=self.scorer if same else None,
            **moved,
        )

    def refit(
        self,
        *,
        kernel: Optional[KernelSpec] = None,
        surrogate: Optional[SurrogateSpec] = None,
        n_samples: Optional[int] = None,
    ) -> Explanation:
        """Fit the kept samples again with another kernel, surrogate or sample count; no model calls.

        Bit for bit a fresh call with ``masks=self.samples[:, :n_samples]`` and these settings
        (``engine.refit``); needs ``return_samples=True``.

        Args:
            kernel: a ``kernel=`` of ``torchlime.explain`` (``ExponentialKernel(width="auto")`` included);
                None: this explanation's.
            surrogate: a ``surrogate=`` of ``torchlime.explain``; None: this explanation's.
            n_samples: fit the first m of the S samples; None: all.

        Returns:
            The new explanation, with samples (B, m, F), outputs (B, m, T) and weights (B, m).
        """
        from torchlime.engine.refit import refit_fields

        return dataclasses.replace(self, **refit_fields(self, kernel=kernel, surrogate=surrogate, n_samples=n_samples))

    def save(self, path: Union[str, Path]) -> None:
        """Write tensors and plain metadata with ``torch.save`` (loadable with ``weights_only=True``).

        Args:
            path: the file to write.
        """
        data = {name: getattr(self, name) for name in _TENSORS if getattr(self, name) is not None}
        if self.coef_std is None and self.coef_se is not None:  # the posterior sd is saved once, as coef_std
            data["coef_se"] = self.coef_se
        data = {k: v.detach().cpu().clone() for k, v in data.items()}  # exp[j]'s views: not the whole batch
        data["input_shape"] = list(self.input_shape)
        data["meta"] = plain(dict(self.meta))
        torch.save(data, Path(path))

    @classmethod
    def load(cls, path: Union[str, Path], map_location: Union[str, torch.device] = "cpu") -> Explanation:
        """Read an explanation written by ``save`` without unpickling arbitrary objects.

        Args:
            path: the file ``save`` wrote.
            map_location: where the tensors go.

        Returns:
            The explanation (without a recorded perturbation).

        Raises:
            ValueError: when the file holds no explanation (another object, missing fields), or a field
                of another kind than ``save`` writes (``StoredDataError``: the file, the field, what it
                must be and what it holds), e.g. a shape that is not a list of non-negative ints.
        """
        data = torch.load(Path(path), map_location=map_location, weights_only=True)
        required = {"coef", "intercept", "score", "local_pred", "target", "features", "n_features", "input_shape"}
        if not isinstance(data, dict) or not required <= set(data):
            found = sorted(map(str, data)) if isinstance(data, dict) else describe(data)
            raise ValueError(
                f"`path` must be a file written by Explanation.save, with the fields "
                f"{sorted(required)}; {path} holds {found}"
            )
        try:
            for name in _TENSORS:
                if name in data and not isinstance(data[name], torch.Tensor):
                    raise StoredDataError(f"{name} must be a tensor, got {describe(data[name])}")
            check_plain(data["input_shape"], list[int], "input_shape")
            if any(n < 0 for n in data["input_shape"]):
                raise StoredDataError(f"input_shape must hold sizes >= 0, got {data['input_shape']}")
            meta = data.get("meta", {})
            check_plain(meta, dict[str, object], "meta")
            if "coef_se" in data and not isinstance(data["coef_se"], torch.Tensor):
                raise StoredDataError(f"coef_se must be a tensor, got {describe(data['coef_se'])}")
            data["input_shape"] = tuple(data["input_shape"])
            loaded = cls(**{k: v for k, v in data.items() if k in _TENSORS or k == "input_shape"})
            loaded.info, loaded.run = rebuild(meta), RunRecord.from_plain(meta)
            if "coef_se" in data:
                method = meta.get("coef_se_method", "stored")
                loaded.coef_se_record = CoefSE(method if isinstance(method, str) else "stored", data["coef_se"])
            shown = loaded.meta  # the records' rendering: the file's other entries stay as read
            loaded.stored = Entries({k: v for k, v in meta.items() if k not in shown})
        except StoredDataError as err:
            raise StoredDataError(f"{path} is not a valid Explanation file: {err}") from None
        return loaded

    def __len__(self) -> int:
        """B, the number of explained inputs."""
        return self.coef.shape[0]

    def __getitem__(self, key: Union[int, slice]) -> Explanation:
        """The explanation of input ``key`` (B = 1) or of a slice of inputs (step 1).

        Every per-input tensor and the typed records (``run.select``: quality flags, sample counts, a
        structured target's record; ``info.select``) are renumbered from 0; ``stored`` stays as read. The
        recorded perturbation covers the whole batch, so it is dropped (metrics rebuild a blend).

        Example:
            >>> net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
            >>> import torchlime
            >>> exp = torchlime.explain(net, torch.rand(3, 1, 4, 4), torch.arange(16).view(1, 1, 4, 4) // 4)
            >>> len(exp), exp[1].coef.shape, len(exp[1:])
            (3, torch.Size([1, 1, 4]), 2)
        """
        b = len(self)
        if isinstance(key, slice):
            start, stop, step = key.indices(b)
            if step != 1:
                raise ValueError(f"`key` must be an int or a slice with step 1, got step {step}")
            if stop <= start:
                raise IndexError(f"`key` selects no input: {key} of an explanation of {b} input(s)")
        elif isinstance(key, numbers.Integral) and not isinstance(key, bool):
            key = int(key)
            if not -b <= key < b:
                raise IndexError(f"`key` must be in [-{b}, {b}) for an explanation of {b} input(s), got {key}")
            start = key % b
            stop = start + 1
        else:
            raise TypeError(f"`key` must be an int or a slice, got {describe(key)}")
        fields = {n: getattr(self, n)[start:stop] for n in _PER_INPUT if getattr(self, n) is not None}
        feats = self.features[start:stop] if self.features.shape[0] == b else self.features
        scorer = None if self.scorer is None else self.scorer.rows(start, stop)
        info = None if self.info is None else self.info.select(start, stop)
        run = None if self.run is None else self.run.select(start, stop)
        se = None if self.coef_se_record is None else self.coef_se_record.select(start, stop)
        return dataclasses.replace(
            self, features=feats, perturbation=None, scorer=scorer, info=info, run=run, coef_se_record=se, **fields
        )

    def _repr_html_(self) -> str:
        """A summary table and pictures of the first inputs, for notebooks (``engine.notebook``)."""
        from torchlime.engine.notebook import to_html

        return to_html(self)

    def __repr__(self) -> str:
        """A short summary: inputs, targets, features, samples, surrogate, fit quality, standard errors."""
        from torchlime.engine._summary import summary

        return summary(self)
