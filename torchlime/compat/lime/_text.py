"""``LimeTextExplainer``: lime's text explainer on ``torchlime.text.explain_text``."""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from torchlime._util.checks import check_positive_float, describe
from torchlime.compat._vocabulary import speaking
from torchlime.compat.lime._checks import check_function, check_sizes, lime_advice, lime_words
from torchlime.compat.lime._common import (
    Recording,
    check_common,
    check_distance,
    one_call,
    one_row,
    random_state_from,
    seed_from,
    surrogate_for,
    target_for,
)
from torchlime.compat.lime._domain import TextDomainMapper
from torchlime.compat.lime._explanation import Explanation
from torchlime.compat.lime._indexed import IndexedCharacters, IndexedString
from torchlime.stages.sampling import UniformCountSampler
from torchlime.stages.weighting import ExponentialKernel
from torchlime.text import explain_text
from torchlime.text.split import Splitter


def _word_starts(pieces: Sequence[str], feats: Sequence[int], n: int) -> list[list[int]]:
    """The character position of every occurrence of every feature (lime's ``positions=True``)."""
    starts: list[list[int]] = [[] for _ in range(n)]
    at = 0
    for piece, f in zip(pieces, feats):
        if f >= 0:
            starts[f].append(at)
        at += len(piece)
    return starts


class LimeTextExplainer:
    """lime's ``LimeTextExplainer``: the same constructor and ``explain_instance``, batched underneath.

    Args:
        kernel_width: width of lime's kernel on the cosine distance x 100 (lime: 25).
        kernel: must be None (lime's exponential kernel).
        verbose: accepted for lime's signature (nothing is printed).
        class_names: names of the classes (default "0", "1", ...).
        feature_selection: "auto", "forward_selection", "highest_weights", "lasso_path" or "none".
        split_expression: separators as a regular expression, or a callable returning the words.
        bow: one feature per distinct word (True) or per occurrence (False).
        mask_string: the string hidden words become when ``bow`` is False (default "UNKWORDZ").
        random_state: None (numpy's global generator), an int or a ``numpy.random.RandomState``.
        char_level: characters are the features.
    """

    def __init__(  # noqa: PLR0913
        self,
        kernel_width: float = 25,
        kernel: object = None,
        verbose: bool = False,
        class_names: Optional[Sequence[object]] = None,
        feature_selection: str = "auto",
        split_expression: Splitter = r"\W+",
        bow: bool = True,
        mask_string: Optional[str] = None,
        random_state: object = None,
        char_level: bool = False,
    ) -> None:
        check_common(kernel, feature_selection, verbose)
        self.kernel_width = check_positive_float(kernel_width, "kernel_width")
        self.class_names = class_names
        self.feature_selection = feature_selection
        self.split_expression, self.bow, self.char_level = split_expression, bow, char_level
        self.mask_string = mask_string
        self.random_state = random_state_from(random_state)

    def explain_instance(
        self,
        text_instance: str,
        classifier_fn: Callable[[list[str]], object],
        labels: Sequence[int] = (1,),
        top_labels: Optional[int] = None,
        num_features: int = 10,
        num_samples: int = 5000,
        distance_metric: str = "cosine",
        model_regressor: object = None,
        **kwargs: Any,
    ) -> Explanation:
        """Explain one text as lime does, returning lime's ``Explanation``.

        Args:
            text_instance: the text.
            classifier_fn: a function over a list of c strings returning (c, K) probabilities.
            labels: the classes to explain (when ``top_labels`` is None).
            top_labels: explain the K most probable classes instead.
            num_features: words per label in the explanation.
            num_samples: N, samples of the neighbourhood (the instance included).
            distance_metric: "cosine" (lime's) or "euclidean", on the binary word vectors.
            model_regressor: None (``Ridge(alpha=1)``), or scikit-learn's Ridge / LinearRegression / Lasso.
            **kwargs: torchlime keywords (``batch_size``, ``progress``, ``device``).

        Returns:
            lime's ``Explanation`` (``as_list``, ``as_map``, ``local_exp``, ``intercept``, ``score``,
            ``top_labels``, ``as_pyplot_figure``, ``as_html``); ``.result`` is torchlime's.

        Raises:
            TypeError / ValueError: naming lime's argument, before ``classifier_fn`` runs (a
                ``text_instance`` that is not a str, ``num_samples`` < 2, negative ``labels``, ...), or
                once the text is split or the output seen (fewer than 2 words, ``labels`` beyond the
                classes, NaN/inf or misshapen scores).
        """
        if not isinstance(text_instance, str):
            raise TypeError(f"`text_instance` must be a str, got {describe(text_instance)}")
        check_function(classifier_fn, "classifier_fn")
        num_samples, num_features, _ = check_sizes(num_samples, num_features)
        target = target_for(labels, top_labels)
        distance = check_distance(distance_metric)
        rec = Recording(classifier_fn, labels=[] if isinstance(target, str) else target)
        unit = "characters" if self.char_level else "words"
        with speaking(lime_words("text_instance", "classifier_fn", unit), lime_advice("classifier_fn")):
            result = explain_text(
                rec,
                text_instance,
                split_expression=self.split_expression,
                bow=self.bow,
                char_level=self.char_level,
                mask_string=self.mask_string,
                target=one_row(target),
                n_samples=num_samples,
                sampler=UniformCountSampler(),
                kernel=ExponentialKernel(width=self.kernel_width, distance=distance, scale=100.0),
                surrogate=surrogate_for(model_regressor, self.feature_selection, num_features, num_samples),
                generator=seed_from(self.random_state),
                **one_call(kwargs, num_samples, len(text_instance)),
            )
        info = result.info
        if info is None or info.text_pieces(0) is None:
            raise TypeError(f"the text explanation carries no record of its words, got {describe(info)}")
        words = info.feature_labels(0) or []
        keep = len(words) if self.feature_selection == "none" else num_features
        indexed = (
            IndexedCharacters(text_instance, bow=self.bow, mask_string=self.mask_string)
            if self.char_level
            else IndexedString(text_instance, self.split_expression, bow=self.bow, mask_string=self.mask_string)
        )
        exp = Explanation(
            result,
            words,
            class_names=self.class_names,
            keep=keep,
            chosen_only=self.feature_selection == "lasso_path",
            last=0 if top_labels else -1,
            reference=rec.first,
            domain_mapper=TextDomainMapper(indexed),
            random_state=self.random_state,
        )
        pieces, piece_features = info.text_pieces(0) or ([], [])
        exp.word_starts = _word_starts(pieces, piece_features, len(words))
        exp.text = "".join(pieces)
        if top_labels:
            exp.top_labels = [int(t) for t in result.target[0].tolist()]
        return exp
