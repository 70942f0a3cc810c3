"""What ``explain_generation`` records of a prompt and its continuation, and one reader per fact.

``GenerationInfo`` is the explanation's ``info``: the labels of the prompt's features (their tokens'
strings) and the continuation's tokens, from which the views name their columns (``prompt_tokens``)
and their rows, one per target (``GenerationInfo.target_labels``): the whole continuation, then each
generated token. The notebook display reads it through the ``Info`` hooks, the text views through
``prompt_tokens`` and ``generated_tokens``; nothing switches on a target's kind.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Optional

import torch

from torchlime._util.checks import describe
from torchlime.engine.explanation import Explanation
from torchlime.text._tokens import TokensInfo
from torchlime.text._with_tokens import WithTokens, rows

#: the label of target 0, the whole continuation's log-probability
WHOLE = "the whole continuation"


@dataclass(frozen=True)
class GenerationInfo(WithTokens):
    """What a generation explanation records (``Explanation.info``; ``meta`` shows it under "text_generation").

    ``coef[b, t, j]`` is the weight of the prompt feature named ``prompt[b][j]`` for target t: t = 0 the
    whole continuation, t = 1 + g its token g (with ``per_token``).

    Attributes:
        prompt: F_b labels per input: each prompt feature's token strings (joined for a word of several
            tokens); the ids written out where no tokenizer named the tokens.
        generated_ids: the G continuation ids of every input.
        generated: the G continuation token strings of every input, or None where no tokenizer named them.
        per_token: whether targets 1..G are the continuation's tokens (else T = 1).
        continuation: long (B, G) the continuation's ids, or None (a record read from a file).
        input_ids: (B, L) the rows explained (prompt and continuation), or None (read from a file).
        attention_mask: (B, L) their attention mask, or None (read from a file).
        continuation_text: with a tokenizer, the B decoded continuations, else None.
        token_info: the ``TokensInfo`` of the token explanation.

    ``meta["text_generation"]`` shows the record without the last four, which ``meta`` shows at its top
    level ("continuation", "input_ids", "attention_mask" as nested lists, "continuation_text"), where
    earlier versions put them.
    """

    key: ClassVar[str] = "text_generation"
    required: ClassVar[frozenset[str]] = frozenset({"prompt", "generated_ids", "generated", "per_token"})
    labelled: ClassVar[str] = "prompt"  # the features' labels: each prompt feature's token strings
    per_input: ClassVar[tuple[str, ...]] = (
        "prompt",
        "generated_ids",
        "generated",
        "continuation",
        "input_ids",
        "attention_mask",
        "continuation_text",
    )
    transient: ClassVar[tuple[str, ...]] = ("continuation", "input_ids", "attention_mask", "continuation_text")

    prompt: list[list[str]]
    generated_ids: list[list[int]]
    generated: Optional[list[list[str]]]
    per_token: bool
    continuation: Optional[torch.Tensor] = dataclasses.field(default=None, compare=False, repr=False)
    input_ids: Optional[torch.Tensor] = dataclasses.field(default=None, compare=False, repr=False)
    attention_mask: Optional[torch.Tensor] = dataclasses.field(default=None, compare=False, repr=False)
    continuation_text: Optional[list[str]] = None

    def top_level(self) -> dict[str, object]:
        """The token record's entries ("mode", ...) and the continuation's, where set.

        Returns:
            "continuation", "input_ids", "attention_mask" (nested lists) and "continuation_text".
        """
        shown = super().top_level()
        for name in self.transient:
            value = getattr(self, name)
            if value is not None:
                shown[name] = value.tolist() if isinstance(value, torch.Tensor) else list(value)
        return shown

    @classmethod
    def _from_fields(cls, plain: Mapping[str, object], tokens: Optional[TokensInfo]) -> GenerationInfo:
        """GenerationInfo's fields from checked plain data, the token record beside them (``WithTokens.from_plain``)."""
        generated, per_token = rows(plain["generated"]), bool(plain["per_token"])
        return cls(rows(plain["prompt"]), rows(plain["generated_ids"]), generated, per_token, token_info=tokens)

    def generated_tokens(self, index: int) -> Optional[list[str]]:
        """Input ``index``'s G generated token strings, or None where no tokenizer named them.

        Args:
            index: the input.

        Returns:
            G strings (``generated_ids[index]`` holds their ids), or None.
        """
        return None if self.generated is None else list(self.generated[index])

    def target_labels(self, index: int) -> list[str]:
        """Input ``index``'s targets: the whole continuation, then each generated token (with ``per_token``).

        Args:
            index: the input.

        Returns:
            T labels: ``WHOLE``, then "token g: <its string>" (or "token g (id <its id>)" unnamed).

        Example:
            >>> GenerationInfo([["a", "b"]], [[7, 9]], [["x", "<y>"]], True).target_labels(0)
            ['the whole continuation', 'token 0: x', 'token 1: <y>']
        """
        if not self.per_token:
            return [WHOLE]
        named = self.generated_tokens(index)
        ids = self.generated_ids[index]
        tokens = [f"token {g}: {s}" for g, s in enumerate(named)] if named is not None else []
        return [WHOLE, *(tokens or [f"token {g} (id {i})" for g, i in enumerate(ids)])]


def generation_record(explanation: Explanation) -> GenerationInfo:
    """The ``GenerationInfo`` of an ``explain_generation`` explanation.

    Args:
        explanation: from ``explain_generation`` (or loaded from its file).

    Returns:
        Its record.

    Raises:
        ValueError: an explanation of another kind.
    """
    info = explanation.info
    if not isinstance(info, GenerationInfo):
        raise ValueError(
            "`explanation` must come from torchlime.text.explain_generation (its info is a GenerationInfo), "
            f"got info {describe(info)}"
        )
    return info


def prompt_tokens(explanation: Explanation, index: int = 0) -> list[str]:
    """The prompt's features of input ``index`` of a generation explanation, named by their tokens.

    Args:
        explanation: from ``explain_generation``.
        index: which input.

    Returns:
        F_b labels: ``coef[index, :, j]`` is the weight of label j (ids written out without a tokenizer).

    Raises:
        ValueError: an explanation of another kind.
    """
    return generation_record(explanation).feature_labels(index)


def generated_tokens(explanation: Explanation, index: int = 0) -> Optional[list[str]]:
    """The continuation's G token strings of input ``index`` of a generation explanation.

    Args:
        explanation: from ``explain_generation``.
        index: which input.

    Returns:
        G strings (target 1 + g explains token g), or None without a tokenizer that names tokens (the
        ids are in ``explanation.info.continuation``).

    Raises:
        ValueError: an explanation of another kind.
    """
    return generation_record(explanation).generated_tokens(index)
