"""``Tabular``: lime's tabular explainer as a modality: training statistics, a sampler, values and a kernel.

``prepare`` fits (or takes) the training statistics, finds every input's level per column, and hands
the engine a feature map of one feature per column, ``TabularSampler`` (does a column stay in the
instance's level), ``TabularPerturbation`` (the values given the masks) and lime's kernel; the engine
samples, runs the model, weighs and fits, batched over the B inputs and T targets on the inputs'
device. The explanation carries a ``TabularInfo`` (the levels and the bins, for ``conditions``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar, Optional, Sequence

import torch

from torchlime._util.checks import check_choice, describe
from torchlime.engine.config import Call, Config
from torchlime.engine.modality import Modality, Prepared
from torchlime.stages.weighting import ExponentialKernel
from torchlime.tabular._discretize import DISCRETIZERS
from torchlime.tabular._info import Sampling, TabularInfo
from torchlime.tabular._inputs import (
    Columns,
    Labels,
    Rows,
    TrainingData,
    call_seed,
    check_names,
    check_perturbed,
    check_tabular_preset,
    check_x,
    training_stats,
    warn_unseen,
)
from torchlime.tabular._numpy import NumpyRows, as_rows
from torchlime.tabular._proximity import ScaledEuclideanKernel, default_width
from torchlime.tabular._sample import TabularPerturbation, TabularSampler, keep_probability
from torchlime.tabular.stats import DiscretizerName, TabularStats
from torchlime.typing import UNSET, Model

#: the ``Call`` fields the modality sets itself (its values replace the blend, which they would shape)
_OWNS = ("perturb_fn", "normalize", "chunk_format", "additional_forward_args", "baseline")


@dataclass(frozen=True, eq=False)
class Tabular(Modality):
    """(B, D) rows of a tabular model, explained as lime's ``LimeTabularExplainer`` explains them.

    Every column is one interpretable feature: ``z_f = 1`` when the sample's value stays in the
    instance's level (its quartile / decile / entropy bin, or its category). Samples are lime's:
    discretised (a level by training frequency, then a value inside the bin: a normal with the bin's
    mean and std truncated to its range) or, with ``discretize_continuous=False``, Gaussian (training
    mean or the instance, training std). Weights are ``exp(-d² / (2 width²))`` on the euclidean
    distance of the scaled rows, width ``0.75 √D`` unless the call's ``kernel`` is
    ``ExponentialKernel(width, distance="euclidean")``, lime's kernel with another width (any other
    ``kernel`` is used as it is). The fill is the modality's own: a ``baseline`` is refused, and so are
    the ``Call`` fields it sets (``owns``).

    Attributes:
        training_data: (N, D) rows (a tensor or an array of numbers), or fitted ``TabularStats``
            (``fit_stats``) to reuse.
        categorical_features: column indices compared by equality, sampled by frequency (ints, numpy
            integers, a 1-D integer array or tensor).
        feature_names: D names, kept in the record for ``conditions``.
        discretizer: "quartile", "decile" or "entropy" (needs ``training_labels``).
        discretize_continuous: True: lime's discretised sampling; False: Gaussian sampling (the
            binary features are still "same bin as the instance").
        sample_around_instance: Gaussian sampling centred on the instance instead of the mean.
        training_labels: (N,) labels of the training rows, numbers or strings (entropy discretizer).
        perturbed: optional (B, S, D) sample rows (a tensor or a numpy array) used instead of drawn
            ones (sample 0 the input); the masks are the call's ``masks`` if given, else "same level
            as the input", and ``n_samples`` is S unless given.
        numpy_model: call the model with numpy rows and take numpy scores (scikit-learn's
            ``predict_proba``, lime's ``classifier_fn``); ``explain_tabular`` sets it for a numpy
            ``X`` and a model that is no torch module.

    Example:
        >>> from torchlime.engine import Explainer
        >>> t = torch.linspace(0, 1, 101)
        >>> train = torch.stack((t, t.flip(0), t ** 2, t.roll(50)), 1)  # (N, D) = (101, 4)
        >>> model = lambda x: torch.stack((4 * x[:, 0], -4 * x[:, 0]), 1).softmax(1)
        >>> exp = Explainer().explain(model, train[[0, 100]], Tabular(train), n_samples=500)
        >>> exp.coef.shape, exp.info.levels[:, 0].tolist()
        (torch.Size([2, 1, 4]), [0, 3])
    """

    owns: ClassVar[frozenset[str]] = frozenset(_OWNS)

    training_data: TrainingData
    categorical_features: Optional[Columns] = None
    feature_names: Optional[Sequence[str]] = None
    discretizer: DiscretizerName = "quartile"
    discretize_continuous: bool = True
    sample_around_instance: bool = False
    training_labels: Optional[Labels] = None
    perturbed: Optional[Rows] = None
    numpy_model: bool = False

    def prepare(self, model: Model, inputs: torch.Tensor, how: Config, call: Call) -> Prepared:
        """Check the rows and settings, fit the statistics, and hand over the sampler, values and kernel.

        Args:
            model: the caller's model (wrapped for numpy rows with ``numpy_model``).
            inputs: float (B, D) rows.
            how: the caller's configuration (kernel and sampler set here where unset).
            call: the caller's call (the values' hook, the seed, and the masks of ``perturbed``).

        Returns:
            The ``Prepared`` call, with a ``TabularInfo``.

        Raises:
            TypeError / ValueError: bad rows (not float, not (B, D), non-finite), training data of the
                wrong shape or non-finite, categorical indices out of range, an unknown discretizer, a
                preset other than None / "lime", a ``baseline`` or an owned ``Call`` field set; named.
        """
        x = check_x(inputs)
        check_tabular_preset(how.preset)
        self._check_settings(how, call)
        batch, d = x.shape
        names = check_names(self.feature_names, d)
        stats = training_stats(self.training_data, x, self.categorical_features, self.discretizer, self.training_labels)
        levels = stats.levels(x)
        warn_unseen(levels, stats, names)
        centre = None
        if not self.discretize_continuous:
            centre = x.double() if self.sample_around_instance else stats.mean.unsqueeze(0)
        seed = call_seed(call.generator)
        index = call.index
        ids = torch.arange(batch, device=x.device) if index is None else torch.as_tensor(index).to(x.device).long()
        given = None
        if self.perturbed is not None:
            given = check_perturbed(as_rows(self.perturbed, "perturbed"), x)
            call = _given_rows(given, stats, levels, call)
        width = lime_width(how.kernel, d)
        if width is not None:
            kernel = (
                ExponentialKernel(width=width, distance="euclidean")
                if centre is None
                else ScaledEuclideanKernel(width, stats.scale, stats.categorical)
            )
            how = dataclasses.replace(how, kernel=kernel)
        if how.sampler is UNSET and call.masks is None:
            how = dataclasses.replace(how, sampler=TabularSampler(keep_probability(stats, levels, centre)))
        how = dataclasses.replace(how, baseline=0.0)
        perturb = TabularPerturbation(stats, levels, centre, seed, ids, given)
        call = dataclasses.replace(call, perturb_fn=perturb, generator=seed)
        info = _record(self, x, stats, levels, names, width)
        features = torch.arange(d, device=x.device).view(1, d)
        adapter = NumpyRows if self.numpy_model else None
        return Prepared(x, features, how, call, adapter=adapter, scope="tabular", input_name="X", info=info)

    def _check_settings(self, how: Config, call: Call) -> None:
        """The modality's own settings, and the configuration and call fields it sets itself."""
        if not isinstance(self.training_data, TabularStats):  # fitted statistics carry their discretizer
            check_choice(self.discretizer, "discretizer", DISCRETIZERS)
        for name in ("discretize_continuous", "sample_around_instance", "numpy_model"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"`{name}` must be True or False, got {describe(getattr(self, name))}")
        if how.baseline is not UNSET:
            raise ValueError(
                f"`baseline` must be unset for tabular data (the values are drawn from the training "
                f"statistics, as lime does), got {describe(how.baseline)}"
            )
        for name in _OWNS[:-1]:  # the call's fields (the baseline is checked above)
            if getattr(call, name) is not None:
                raise ValueError(
                    f"`{name}` must be None for tabular data (Tabular draws the sample rows itself), "
                    f"got {describe(getattr(call, name))}"
                )


def lime_width(kernel: object, n_columns: int) -> Optional[float]:
    """The width of lime's tabular kernel that a call's ``kernel`` asks for, or None for another kernel.

    Args:
        kernel: the call's kernel: unset (lime's kernel, ``0.75 √D``), an ``ExponentialKernel`` with a
            number width on the euclidean distance of the masks (lime's kernel with that width: on
            the scaled rows with Gaussian sampling), or any other kernel (used as it is: None).
        n_columns: D, the number of columns.

    Example:
        >>> lime_width(UNSET, 16), lime_width(ExponentialKernel(2.0, distance="euclidean"), 16)
        (3.0, 2.0)
        >>> lime_width(ExponentialKernel(2.0), 16) is None  # cosine: not lime's tabular kernel
        True
    """
    if kernel is UNSET:
        return default_width(n_columns)
    if not isinstance(kernel, ExponentialKernel) or isinstance(kernel.width, str):  # "auto": the engine's choice
        return None
    lime = (kernel.distance, kernel.space, kernel.scale) == ("euclidean", "mask", 1.0)
    return float(kernel.width) if lime else None


def _given_rows(perturbed: torch.Tensor, stats: TabularStats, levels: torch.Tensor, call: Call) -> Call:
    """The call for explicit sample rows (B, S, D): ``n_samples`` S and the masks they imply, unless given."""
    if call.n_samples is UNSET:
        call = dataclasses.replace(call, n_samples=perturbed.shape[1])
    if call.masks is None:
        masks = stats.levels(perturbed) == levels.unsqueeze(1)
        masks[:, 0] = True
        call = dataclasses.replace(call, masks=masks)
    return call


def _record(
    tabular: Tabular,
    x: torch.Tensor,
    stats: TabularStats,
    levels: torch.Tensor,
    names: Optional[list[str]],
    width: Optional[float],
) -> TabularInfo:
    """The explanation's record: the inputs' levels and category values, and the training bins."""
    cat_idx = stats.categorical.nonzero().flatten()
    if tabular.discretize_continuous:
        sampling: Sampling = "discretized"
    else:
        sampling = "gaussian_instance" if tabular.sample_around_instance else "gaussian"
    return TabularInfo(
        sampling=sampling,
        discretizer=stats.discretizer,
        kernel_width=width,
        feature_names=names,
        levels=levels,
        categorical=[int(c) for c in cat_idx.tolist()],
        instances=x[:, cat_idx],  # the inputs' values of the categorical columns
        boundaries=[[v for v in row if math.isfinite(v)] for row in stats.boundaries.tolist()],
        values=[[v for v in row if not math.isnan(v)] for row in stats.values.tolist()],
    )
