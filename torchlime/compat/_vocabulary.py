"""The peers' vocabulary: torchlime's errors and quality warnings reworded in the words of the API called.

The compatibility layers check their arguments themselves, in the peer's words, before the engine
runs; what only the engine can see (an output width, a feature count after splitting a text, a
surrogate's quality) comes back from it in torchlime's words (``n_samples``, ``target``, "explain
logits: softmax=False"). ``speaking`` runs the engine and rewords what it raises and warns: errors keep
their type, warnings their category, and the advice becomes one the peer's user can follow.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import warnings
from types import FrameType
from typing import Iterator, Mapping, Optional, Sequence

from torchlime._util.checks import check_positive_int
from torchlime.engine.quality import UnreliableExplanationWarning
from torchlime.engine.sizes import SizeError

#: The quality flags of ``torchlime.engine.quality`` and the words that identify each in its summary.
FLAGS = {"saturated": "barely vary", "poor_fit": "R²", "few_samples": "effective samples"}
_PREFIX, _SUFFIX = "unreliable explanation: ", " (see torchlime.engine.quality)"
# one flag of the summary: its advice (which may hold "; "), then which inputs (and data-set indices) it concerns
_PART = re.compile(
    r"(?P<what>.*?)(?P<where> for input\(s\) \[[^\]]*\](?: \.\.\.)?(?: \(data-set index \[[^\]]*\](?: \.\.\.)?\))?)"
    r"(?:; |$)"
)
_SKIPPED = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))), os.path.abspath(contextlib.__file__))


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside torchlime and ``contextlib`` (the caller's line)."""
    frame: Optional[FrameType] = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_SKIPPED):
        frame, level = frame.f_back, level + 1
    return level


def reword(text: str, replacements: Sequence[tuple[str, str]]) -> str:
    """Apply ``(pattern, replacement)`` regular-expression substitutions in turn.

    Args:
        text: a message in torchlime's words.
        replacements: the substitutions, in order.

    Returns:
        The message in the peer's words (unchanged where nothing matched).
    """
    for pattern, replacement in replacements:
        text = re.sub(pattern, replacement, text)
    return text


def reword_quality(text: str, advice: Mapping[str, Optional[str]], per_input: bool) -> Optional[str]:
    """An ``UnreliableExplanationWarning`` summary with the peer's advice for each flag.

    Args:
        text: the engine's message ("unreliable explanation: A for input(s) [0]; B ...").
        advice: flag name ("saturated", "poor_fit", "few_samples") -> the peer's advice, or None to
            drop the flag (it says nothing true about what the peer returns).
        per_input: keep which inputs each flag concerns (False for one instance).

    Returns:
        The reworded message; None when every flag was dropped. A message of an unknown form comes
        back unchanged.
    """
    if not (text.startswith(_PREFIX) and text.endswith(_SUFFIX)):
        return text
    body = text[len(_PREFIX) : -len(_SUFFIX)]
    found = list(_PART.finditer(body))
    ends = [0] + [m.end() for m in found]
    if not found or ends[-1] != len(body) or any(m.start() != end for m, end in zip(found, ends)):
        return text  # not a summary of the form this module knows
    parts = []
    for match in found:
        what, where = match.group("what"), match.group("where")
        flag = next((name for name, words in FLAGS.items() if words in what), None)
        if flag is None:
            parts.append(what + where)
            continue
        said = advice.get(flag)
        if said is not None:
            parts.append(said + (where.replace("input(s)", "example(s)") if per_input else ""))
    return _PREFIX + "; ".join(parts) if parts else None


@contextlib.contextmanager
def speaking(
    errors: Sequence[tuple[str, str]], advice: Mapping[str, Optional[str]], per_input: bool = False
) -> Iterator[None]:
    """Run engine code with its errors and quality warnings in the peer's words.

    A ``ValueError`` or ``TypeError`` (exactly those types, and the engine's ``SizeError``: a model's own
    exception classes pass untouched) is raised again, same type, with its message reworded (``reword``),
    chained to the original. Warnings are collected while the code runs and emitted after it, in order: an
    ``UnreliableExplanationWarning`` reworded (``reword_quality``, same category, pointing at the
    caller's line), every other one as it was.

    Args:
        errors: the ``(pattern, replacement)`` substitutions for error messages.
        advice: the peer's advice per quality flag (see ``reword_quality``).
        per_input: keep which examples a quality flag concerns.

    Yields:
        Nothing.
    """
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            caught = record if record is not None else []
            yield
    except (ValueError, TypeError) as err:
        said = str(err)
        if isinstance(err, SizeError) and reword(said, errors) != said:  # a size refusal keeps its type
            name = reword(f"`{err.argument}`", errors).strip("`")
            raise SizeError(reword(said, errors), name, err.value, err.needed, err.limit) from err
        if type(err) in (ValueError, TypeError) and reword(said, errors) != said:
            raise type(err)(reword(said, errors)) from err
        raise
    finally:
        for w in caught:
            if issubclass(w.category, UnreliableExplanationWarning):
                text = reword_quality(str(w.message), advice, per_input)
                if text is not None:
                    warnings.warn(text, w.category, stacklevel=_caller_level())
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)


def check_count(value: object, name: str, minimum: int, why: str) -> int:
    """An int (not a bool) of at least ``minimum``.

    Args:
        value: the argument.
        name: its name.
        minimum: the smallest value taken.
        why: the reason for the minimum, for the message.

    Returns:
        It, as an int.

    Raises:
        TypeError / ValueError: naming ``name``.
    """
    try:
        return check_positive_int(value, name, minimum)
    except ValueError:
        raise ValueError(f"`{name}` must be an int >= {minimum} ({why}), got {value}") from None


#: Settings of scikit-learn's (and captum's) linear models that only steer the solver: the exact batched
#: fit reaches the same optimum whatever they are.
_SOLVER_SETTINGS = frozenset(
    {"alpha", "copy_X", "max_iter", "tol", "random_state", "solver", "selection", "precompute", "warm_start", "n_jobs"}
)
#: Settings that change the fitted model, with the values the batched surrogates fit (captum's SGD: ``bias``,
#: ``norm_type``; scikit-learn before 1.2 reports ``normalize`` False or "deprecated").
_FITTED_AS: dict[str, tuple[object, ...]] = {
    "fit_intercept": (True,),
    "positive": (False,),
    "bias": (True,),
    "norm_type": (None,),
    "normalize": (False, "deprecated"),
}


def check_regressor_settings(settings: Mapping[str, object], name: str, argument: str) -> None:
    """Refuse a linear model's settings that change what it fits, unless they hold the value torchlime fits.

    torchlime's surrogates fit an unconstrained model with an intercept, penalised by ``alpha`` only; a
    setting such as ``positive=True`` or ``fit_intercept=False`` would give other numbers than the peer's.

    Args:
        settings: the model's settings (scikit-learn's ``get_params()``, captum's ``construct_kwargs``).
        name: the model's class name, for the message.
        argument: the argument that passed it (``model_regressor``, ``interpretable_model``).

    Raises:
        ValueError: a setting other than ``alpha`` and the solver's that changes the fit.
    """
    changed = {
        k: v
        for k, v in settings.items()
        if k not in _SOLVER_SETTINGS and not any(v is f or v == f for f in _FITTED_AS.get(k, ()))
    }
    if changed:
        shown = ", ".join(f"{k}={v!r}" for k, v in sorted(changed.items()))
        raise ValueError(
            f"`{argument}` {name}({shown}) fits another model than torchlime's surrogates do (an unconstrained "
            f"linear model with an intercept, penalised by alpha only): leave {', '.join(sorted(changed))} at "
            f"the default, or pass a torchlime surrogate (torchlime.Ridge, torchlime.Lasso)"
        )
