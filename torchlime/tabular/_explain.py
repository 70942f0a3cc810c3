"""``explain_tabular``: lime's tabular explainer (the ``Tabular`` modality) in one call.

The front door takes numpy rows as lime does (a float32 tensor on the CPU, and a model that is no
torch module called with numpy rows), then has the engine explain them with ``Tabular``: training
statistics, lime's samples, values and kernel, one feature per column, batched on X's device.
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

import torch

from torchlime.engine import Explanation, explain_with
from torchlime.tabular._inputs import Columns, Labels, Rows, TrainingData
from torchlime.tabular._modality import DiscretizerName, Tabular
from torchlime.tabular._numpy import as_rows, takes_numpy
from torchlime.typing import (
    UNSET,
    AccelerateMode,
    BatchSize,
    KernelSpec,
    MemorySpec,
    Model,
    NSamples,
    OutputSelector,
    PresetName,
    SamplerSpec,
    Seed,
    SurrogateSpec,
    TargetSpec,
    Unset,
)


def explain_tabular(
    model: Model,
    X: Rows,
    *,
    training_data: TrainingData,
    categorical_features: Optional[Columns] = None,
    feature_names: Optional[Sequence[str]] = None,
    discretizer: DiscretizerName = "quartile",
    discretize_continuous: bool = True,
    sample_around_instance: bool = False,
    training_labels: Optional[Labels] = None,
    perturbed: Optional[Rows] = None,
    target: Union[TargetSpec, Unset] = UNSET,
    n_samples: Union[NSamples, Unset] = UNSET,
    generator: Seed = None,
    index: Optional[torch.Tensor] = None,
    return_samples: bool = False,
    output: OutputSelector = None,
    softmax: bool = False,
    masks: Optional[torch.Tensor] = None,
    sampler: Union[SamplerSpec, Unset] = UNSET,
    kernel: Union[KernelSpec, Unset] = UNSET,
    surrogate: Union[SurrogateSpec, Unset] = UNSET,
    preset: Optional[PresetName] = None,
    accelerate: Optional[AccelerateMode] = None,
    max_memory: MemorySpec = None,
    batch_size: BatchSize = None,
    progress: bool = False,
) -> Explanation:
    """Explain B rows of tabular data with lime's tabular LIME, batched on X's device.

    Every column is one interpretable feature: ``z_f = 1`` when the sample's value stays in
    the instance's level (its quartile / decile / entropy bin, or its category). Samples are
    lime's: discretised (a level by training frequency, then a value inside the bin: a normal
    with the bin's mean and std truncated to its range) or, with ``discretize_continuous=False``,
    Gaussian (training mean or the instance, training std). Weights are
    ``exp(-d² / (2 width²))`` on the euclidean distance of the scaled rows, width ``0.75 √D``.

    Args:
        model: callable on (c, D) rows of X's dtype returning scores (c, K) (probabilities of a
            classifier, or a regressor's (c,) outputs). With a numpy ``X``, a model that is not
            an ``nn.Module`` (e.g. scikit-learn's ``predict_proba``, taken as it is) is called
            with numpy float32 rows, as lime calls ``classifier_fn``, and may return numpy
            scores; an ``nn.Module`` gets tensors.
        X: float (B, D) rows to explain: a tensor on any device, or a numpy array of numbers
            (taken as a float32 tensor on the CPU; the explanation is torch either way).
        training_data: (N, D) tensor or array, or a ``TabularStats`` (``fit_stats``) to reuse.
        categorical_features: column indices compared by equality, sampled by frequency (ints,
            numpy integers, a 1-D integer array or tensor).
        feature_names: D names, kept in the explanation's record for ``conditions``.
        discretizer: "quartile", "decile" or "entropy" (needs ``training_labels``).
        discretize_continuous: True: lime's discretised sampling; False: Gaussian sampling
            (the binary features are still "same bin as the instance").
        sample_around_instance: Gaussian sampling centred on the instance instead of the mean.
        training_labels: (N,) labels of the training rows, numbers or strings (entropy discretizer).
        perturbed: optional (B, S, D) sample rows (a tensor, or a numpy array like ``X``) to
            use instead of drawing them (sample 0 the input); masks are ``masks=`` if given,
            else "same level as the input".
        preset: None or "lime" (``LimeTabularExplainer``'s settings: N = 5000, Ridge(1), top
            class); other presets are refused (they have no tabular sampler, kernel and values).
        generator: int seed or ``torch.Generator`` (masks and values derive from it).
        kernel: ``ExponentialKernel(width, distance="euclidean")``: lime's kernel with that width
            (default ``0.75 √D``); any other ``torchlime.explain`` kernel replaces lime's.
        sampler: replaces the level sampler (a ``torchlime.explain`` sampler; values follow any masks).
        target: None (top class), an int, a (B,) or (B, T) tensor, a list, "all" or "topK".
        n_samples: S samples per input (the input itself included), or "auto".
        index: long (B,) index of every row in a larger data set (masks and values follow it).
        return_samples: keep the masks (B, S, D), outputs (B, S, T) and weights (B, S).
        output: selector of tuple / dict model outputs (a key, an index or a callable).
        softmax: explain the softmax of the outputs.
        masks: explicit bool masks (B, S, D) instead of sampling.
        surrogate: a ``Surrogate`` or "ridge" / "lasso" / "klasso" / "bayes".
        accelerate: None or "fast" (``accel.accelerate_model``).
        max_memory: CUDA memory budget of a chunk (bytes or a fraction of the device's memory).
        batch_size: rows per model call; None: the default rule; "measure": timed once.
        progress: show a progress bar. (There is no ``baseline``: the values are drawn from the
            training statistics.)

    Returns:
        ``Explanation``: coef (B, T, D), one coefficient per column; ``info`` is a ``TabularInfo``
        (the inputs' levels and the bins, read by ``conditions``), shown as plain data in
        ``meta["tabular"]``.

    Raises:
        TypeError / ValueError: bad X (not float, not (B, D), non-finite; before any model
            call), training data of the wrong shape or non-finite, categorical indices out of
            range, an unknown discretizer, a preset other than None / "lime", an unknown
            keyword (Python's own TypeError), and everything ``torchlime.explain`` raises; each
            names the argument, what was expected and what came.

    Example:
        >>> t = torch.linspace(0, 1, 101)
        >>> train = torch.stack((t, t.flip(0), t ** 2, t.roll(50)), 1)  # (N, D) = (101, 4)
        >>> model = lambda x: torch.stack((4 * x[:, 0], -4 * x[:, 0]), 1).softmax(1)
        >>> exp = explain_tabular(model, train[[0, 100]], training_data=train, n_samples=500)
        >>> exp.coef.shape, exp.coef[:, 0].abs().argmax(1).tolist()  # the model reads column 0
        (torch.Size([2, 1, 4]), [0, 0])
    """
    modality = Tabular(
        training_data,
        categorical_features,
        feature_names,
        discretizer,
        discretize_continuous,
        sample_around_instance,
        training_labels,
        perturbed,
        numpy_model=takes_numpy(model, X),
    )
    rows = as_rows(X, "X")  # numpy rows: a float32 tensor on the CPU
    return explain_with(model, rows, modality, locals())
