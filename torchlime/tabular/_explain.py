"""``explain_tabular``: lime's tabular explainer (the ``Tabular`` modality) in one call.

The front door takes numpy rows as lime does (a float32 tensor on the CPU, and a model that is no
torch module called with numpy rows), then has the engine explain them with ``Tabular``: training
statistics, lime's samples, values and kernel, one feature per column, batched on X's device.
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

from typing_extensions import Unpack

from torchlime.engine import Call, ExplainOptions, Explanation, documented, explain_with
from torchlime.tabular._inputs import Columns, Labels, Rows, TrainingData
from torchlime.tabular._numpy import as_rows, takes_numpy
from torchlime.tabular._tabular import Tabular
from torchlime.tabular.stats import DiscretizerName
from torchlime.typing import UNSET, Model, NSamples, Seed, TargetSpec, Unset


@documented
def explain_tabular(  # noqa: D417, PLR0913
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
    **options: Unpack[ExplainOptions],
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
        generator: int seed or ``torch.Generator`` (masks and values derive from it).
        **options: the engine's options (``ExplainOptions``) but ``baseline`` (the values are drawn
            from the training statistics), ``perturb_fn``, ``normalize``, ``chunk_format`` and
            ``additional_forward_args``. For rows, ``kernel=ExponentialKernel(width,
            distance="euclidean")`` is lime's kernel with that width (default ``0.75 √D``) and any
            other kernel replaces lime's; a ``sampler`` replaces the level sampler (values follow any
            masks); ``masks`` are (B, S, D); ``preset`` is None or "lime" (``LimeTabularExplainer``'s
            settings: N = 5000, Ridge(1), top class), other presets are refused (they have no tabular
            sampler, kernel and values).

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
    return explain_with(model, rows, modality, Call(target, n_samples, generator), options, "explain_tabular")
