"""The options of every metric that runs the model, said once: ``RunOptions`` and ``ScoreOptions``.

A metric names what it measures and takes how its rows are scored as ``**options:
Unpack[ScoreOptions]`` (``label_flip``, which compares top classes, ``Unpack[RunOptions]``), so type
checkers and IDEs see each keyword and its type; ``scoring`` checks them, fills in the explanation's own
output selector and softmax, and gives the metric one ``Scoring`` record to pass on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional, cast

from typing_extensions import TypedDict

from torchlime._util.checks import check_positive_int
from torchlime.metrics._common import Scoring, check_bool
from torchlime.metrics._replay import own_output, own_softmax
from torchlime.stages.forward.model import OutputSelector

#: the arguments the metrics that hide features share with ``deletion``, which describes them in full: each of
#: them writes only its own (``_util.argdocs.with_args`` adds these)
AS_IN_DELETION = {
    "model": "the model the explanation explained (the user's), as in ``metrics.deletion``.",
    "inputs": "(B, ...) the explained inputs.",
    "explanation": "their ``Explanation``, or a plain attribution tensor, as in ``metrics.deletion``.",
    "features": "(B or 1, ...) feature map of a per-feature attribution tensor, as in ``metrics.deletion``.",
    "target": "the output column of a plain attribution tensor, as in ``metrics.deletion``.",
    "steps": "None (one feature per step) or the number of evenly spaced steps.",
    "baseline": "None (the explanation's own fill) or a fill, as in ``metrics.deletion``.",
    "return_curves": "also return the curves and the x positions.",
    "**options": "how the rows are scored (``metrics.ScoreOptions``: ``batch_size``, ``output``,\n``softmax``, "
    "``progress``).",
}


class RunOptions(TypedDict, total=False):
    """How a metric scores its rows through the model: the keywords every metric that runs the model takes.

    None is required; a missing one takes the default below.

    Attributes:
        batch_size: rows per model call (None, the default: the rule of ``torchlime.stages.forward.chunking``).
        output: selector of tuple / dict model outputs (a key, an index or a callable), as in
            ``torchlime.explain``; None (the default): the explanation's own (``Explanation.call.output``;
            automatic when it has none).
        progress: show a tqdm bar on stderr over the model's rows, labelled with the metric's name (the
            engine's progress bar; default False); the values are the same either way.
    """

    batch_size: Optional[int]
    output: OutputSelector
    progress: bool


class ScoreOptions(RunOptions, total=False):
    """``RunOptions`` and ``softmax``: the keywords of every metric that reads the model's scores.

    Attributes:
        softmax: score the softmax of the outputs (probabilities of logit models), as in ``torchlime.explain``;
            None (the default): as the explanation did (False when it records none).
    """

    softmax: Optional[bool]


def scoring(options: Mapping[str, object], explanation: object, who: str, softmax: bool = True) -> Scoring:
    """The ``Scoring`` of a metric's ``**options`` for ``explanation``.

    Args:
        options: the keywords that reached the metric's ``**options``.
        explanation: the explanation measured (its own output selector and softmax fill in a None).
        who: the metric's name, for the messages and the progress bar.
        softmax: whether the metric takes ``softmax`` (``ScoreOptions``) or not (``RunOptions``: False).

    Raises:
        TypeError / ValueError: a keyword the metric does not take (Python's words, with the options it
            takes), or a bad value (named).

    Example:
        >>> scoring({"batch_size": 64}, None, "deletion")
        Scoring(batch_size=64, output=None, softmax=False, progress=False, desc='deletion')
    """
    accepted = tuple((ScoreOptions if softmax else RunOptions).__annotations__)
    unknown = [k for k in options if k not in accepted]
    if unknown:
        one = len(unknown) == 1
        what = f"an unexpected keyword argument {unknown[0]!r}" if one else f"unexpected keyword arguments {unknown}"
        raise TypeError(f"{who}() got {what}; its options are {', '.join(accepted)}")
    given, batch = options.get("softmax"), options.get("batch_size")
    batch_size = None if batch is None else check_positive_int(batch, "batch_size")
    own = own_softmax(None if given is None else check_bool(given, "softmax"), explanation)
    progress = check_bool(options.get("progress", False), "progress")
    output = own_output(cast(OutputSelector, options.get("output")), explanation)
    return Scoring(batch_size, output, own if softmax else False, progress, who)
