"""lime's ``explain_instance`` arguments, checked in lime's words before the classifier runs.

Every error names lime's argument (``image``, ``data_row``, ``text_instance``, ``training_data``,
``num_samples``, ``labels``, ``top_labels``, ``num_features``, ``classifier_fn`` / ``predict_fn``);
``lime_words`` and ``lime_advice`` reword what only the engine can see (``speaking``).
"""

from __future__ import annotations

import numbers
from typing import Iterable, Optional, TypeGuard, cast

import numpy as np
from numpy.typing import NDArray

from torchlime._util.checks import describe
from torchlime.compat._vocabulary import check_count


def check_function(fn: object, name: str) -> None:
    """Raise ``TypeError`` unless the classifier is callable.

    Args:
        fn: ``classifier_fn`` / ``predict_fn``.
        name: its name.
    """
    if not callable(fn):
        raise TypeError(f"`{name}` must be a function of a batch returning scores, got {describe(fn)}")


def check_sizes(num_samples: object, num_features: object, batch_size: object = 1) -> tuple[int, int, int]:
    """Check the counts: ``num_samples`` >= 2 (the instance and a sample), ``num_features``, ``batch_size`` >= 1.

    Args:
        num_samples: N, the instance included.
        num_features: features per label in the explanation.
        batch_size: rows per classifier call.

    Returns:
        The three, as ints.

    Raises:
        TypeError / ValueError: naming the argument.
    """
    return (
        check_count(num_samples, "num_samples", 2, "the instance and at least one perturbed sample"),
        check_count(num_features, "num_features", 1, "features listed per label"),
        check_count(batch_size, "batch_size", 1, "rows per classifier call"),
    )


def check_labels(labels: object, top_labels: object) -> tuple[list[int], Optional[int]]:
    """Check ``labels`` (ints >= 0) and ``top_labels`` (None or an int >= 0; 0 means ``labels``, as in lime).

    Args:
        labels: an int or a sequence of ints.
        top_labels: None or an int.

    Returns:
        ``(labels, top_labels)``: the labels as a list (empty with ``top_labels``, which lime then
        reads alone), ``top_labels`` as an int or None.

    Raises:
        TypeError: not ints.
        ValueError: negative, or no label at all without ``top_labels``.
    """
    if top_labels is not None and (isinstance(top_labels, (bool, np.bool_)) or not _is_int(top_labels)):
        raise TypeError(f"`top_labels` must be None or an int (the K most probable labels), got {describe(top_labels)}")
    if top_labels is not None and int(top_labels) < 0:
        raise ValueError(f"`top_labels` must be >= 0, got {top_labels}")
    if top_labels:  # lime ignores labels then
        return [], int(top_labels)
    many = labels if isinstance(labels, (list, tuple, np.ndarray, range)) else [labels]
    if not all(_is_int(x) for x in many):
        raise TypeError(f"`labels` must be ints (class indices), got {describe(labels)}")
    listed = [int(x) for x in cast("Iterable[numbers.Integral]", many)]  # ints, as just checked
    if any(x < 0 for x in listed):
        raise ValueError(f"`labels` must be >= 0 (class indices), got {listed}")
    if not listed:
        raise ValueError("`labels` must name at least one class (or pass top_labels), got none")
    return listed, None


def _is_int(x: object) -> TypeGuard[numbers.Integral]:
    return isinstance(x, numbers.Integral) and not isinstance(x, (bool, np.bool_))


def check_finite_array(arr: NDArray[np.number], name: str) -> None:
    """Raise ``ValueError`` naming ``name`` when a numeric array holds NaN or inf.

    Args:
        arr: the array.
        name: its name.
    """
    bad = ~np.isfinite(arr)
    if bad.any():
        raise ValueError(f"`{name}` must be finite, got {int(bad.sum())} NaN/inf values")


def lime_words(instance: str, fn: str, unit: str) -> list[tuple[str, str]]:
    """The engine's messages in lime's words (the substitutions for ``speaking``).

    Args:
        instance: lime's name of the explained instance ("image", "text_instance", "data_row").
        fn: the classifier's name ("classifier_fn", "predict_fn").
        unit: what a feature is ("superpixels", "words", "columns").

    Returns:
        ``(pattern, replacement)`` pairs.
    """
    return [
        (
            r"every \w+ needs at least 2 \w+ to explain; `\w+`(?: rows)? \[[^\]]*\] have fewer",
            f"`{instance}` must have at least 2 {unit} to explain, got fewer",
        ),
        (r" \(elements with negative feature ids[^)]*\)", ""),
        (r"split them finer \(a finer feature map\)", f"lime needs at least 2 {unit}"),
        (r"`n_samples`", "`num_samples`"),
        (r"`target` list must hold", "`labels` must hold"),
        (r"`target`", "`labels`"),
        (r"`(inputs|images|texts|X)`", f"`{instance}`"),
        (r"check the model and the baseline", f"check {fn}"),
        (r"the model returned", f"{fn} returned"),
        (r"model output must", f"{fn}'s output must"),
        (r" \(pass `output=` to select one\)", ""),
        (r"for a model with", f"for a {fn} with"),
        (r" \(inputs \[0\]\)", ""),
    ]


def lime_advice(fn: str, scores: str = "probabilities") -> dict[str, Optional[str]]:
    """The quality flags' advice in lime's words (lime has no ``softmax`` switch: the function is the user's).

    Args:
        fn: the classifier's name.
        scores: what it returns ("probabilities", "predictions").

    Returns:
        Flag name -> advice.
    """
    return {
        "saturated": f"{fn} returns saturated {scores}: they barely vary over the samples, so the weights are "
        "noise-sized",
        "poor_fit": "the linear surrogate explains under 10% of the output's variation (score, the weighted R², < 0.1)",
        "few_samples": "fewer effective samples than features: raise num_samples or kernel_width",
    }
