"""``Continuation``: explain a causal language model by the log-probability of a generated text.

Each row holds a prompt followed by a continuation of G tokens; the model returns next-token logits
(rows, L, V) (a tensor, or ``.logits`` of a Hugging Face output). The continuation is teacher-forced: the
score of token g is log p(y_g | row[:start + g]), read from the logits at position start + g - 1. The
targets are the whole continuation's summed log-probability and, with ``per_token``, each token's.

The target must know where the continuation starts in every row and which ids it holds: the front door
``torchlime.text.explain_generation`` sets them (``Continuation.prepared``) before the engine binds it.
"""

from __future__ import annotations

from typing import Optional, Union, cast

import torch

from torchlime._util.checks import check_integer, check_tensor, describe, from_numpy
from torchlime.targets._records import ContinuationInfo
from torchlime.targets.base import Bound, Target, tensor_output

#: the most tokens ``Continuation`` generates (2**16). Greedy generation makes one model call per token over rows
#: that grow by one token each time, and the continuation becomes 1 + G targets whose scores (B, S, 1 + G) are kept
#: whole: 65,536 tokens is beyond the context window of most language models and already takes 256 KiB of scores
#: per sample; a larger count is a mistake (10**9 would run a billion model calls), refused before any runs.
MAX_NEW_TOKENS = 2**16


class Continuation(Target):
    """Teacher-forced log-probabilities of a continuation: T = 1 + G (``per_token``) or T = 1.

    score[row, 0] = sum_g log softmax(logits[row, start + g - 1])[y_g] (the whole continuation), and with
    ``per_token`` score[row, 1 + g] = log softmax(logits[row, start + g - 1])[y_g], for the continuation
    ids y (B, G) of the row's input and the position ``start`` (B,) of its first token.

    Args:
        token_ids: integer (B, G) continuation ids to explain, or None: ``explain_generation`` generates
            them greedily (``max_new_tokens`` of them).
        max_new_tokens: G when ``token_ids`` is None (ignored otherwise); at least 1 and at most
            ``MAX_NEW_TOKENS`` (2**16).
        per_token: explain every token besides the whole continuation.

    Raises:
        TypeError / ValueError: naming the argument, expected and got value.

    Example:
        >>> lm = lambda ids: torch.nn.functional.one_hot((ids + 1) % 8, 8).float() * 5  # next = id + 1
        >>> target = Continuation(per_token=True).prepared(torch.tensor([[3, 4]]), torch.tensor([2]))
        >>> bound = target.bind(lm(torch.tensor([[1, 2, 3, 4]])), 1)
        >>> bound.score(lm(torch.tensor([[1, 2, 3, 4]])), torch.tensor([0])).shape  # (rows, 1 + G)
        torch.Size([1, 3])
    """

    name = "Continuation"

    def __init__(self, token_ids: object = None, max_new_tokens: int = 8, per_token: bool = True) -> None:
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise ValueError(f"`max_new_tokens` must be an int >= 1, got {describe(max_new_tokens)}")
        if max_new_tokens > MAX_NEW_TOKENS:
            raise ValueError(
                f"`max_new_tokens` must be at most {MAX_NEW_TOKENS} (2**16, one model call per generated token), got "
                f"{max_new_tokens}; to explain a given continuation pass its ids as `token_ids`"
            )
        if not isinstance(per_token, bool):
            raise TypeError(f"`per_token` must be a bool, got {describe(per_token)}")
        ids: Optional[torch.Tensor] = None
        if token_ids is not None:
            ids = check_tensor(from_numpy(token_ids), "token_ids")
            check_integer(ids, "token_ids")
            if ids.ndim != 2 or ids.shape[1] == 0:
                raise ValueError(f"`token_ids` must have shape (B, G) with G >= 1, got {tuple(ids.shape)}")
            ids = ids.long()
        self.token_ids: Optional[torch.Tensor] = ids
        self.max_new_tokens = max_new_tokens
        self.per_token = per_token
        self.start: Optional[torch.Tensor] = None
        self._first: Optional[int] = None  # the start of every input, when one int was given
        self._steps: Optional[torch.Tensor] = None  # then long 0 .. start + G - 1

    @property
    def n_tokens(self) -> int:
        """G: the continuation's length (given ids, else ``max_new_tokens``)."""
        return self.max_new_tokens if self.token_ids is None else int(self.token_ids.shape[1])

    def check(self, batch: int) -> None:
        """Refuse continuation ids of another batch size than the B inputs.

        Args:
            batch: B.
        """
        if self.token_ids is not None and self.token_ids.shape[0] != batch:
            raise ValueError(
                f"`token_ids` must hold one continuation per input: shape ({batch}, G), "
                f"got {tuple(self.token_ids.shape)}"
            )

    def prepared(self, continuation_ids: torch.Tensor, start: Union[torch.Tensor, int]) -> Continuation:
        """A copy bound to rows that hold each prompt followed by its continuation.

        Args:
            continuation_ids: integer (B, G) the continuation of every input.
            start: integer (B,) the position of each input's first continuation token (>= 1: the
                prompt has a token), or one int for every input (rows of one layout, as
                ``explain_generation`` makes them: the target's positions are then host numbers).

        Returns:
            A new ``Continuation`` with ``token_ids`` and ``start`` set (this one is left alone).

        Raises:
            ValueError: shapes that do not match, or a start before position 1.
        """
        if continuation_ids is None:
            raise ValueError("`continuation_ids` must be an integer (B, G) tensor, got None")
        out = Continuation(continuation_ids, self.max_new_tokens, self.per_token)
        ids = cast(torch.Tensor, out.token_ids)
        if isinstance(start, int) and not isinstance(start, bool):  # one start: checked on the host
            if start < 1:
                raise ValueError(f"`start` must be >= 1 (a continuation follows a prompt), got {start}")
            # 0 .. start + G - 1: the start, the targets' labels and the positions read are views of one arange
            out._steps = torch.arange(start + ids.shape[1], device=ids.device)
            out.start = out._steps[start : start + 1].expand(ids.shape[0])
            out._first = start
            return out
        each = check_tensor(from_numpy(start), "start")
        check_integer(each, "start")
        if each.shape != (ids.shape[0],):
            raise ValueError(f"`start` must have shape ({ids.shape[0]},) (one per input), got {tuple(each.shape)}")
        if each.numel() and int(each.min()) < 1:
            raise ValueError(f"`start` must be >= 1 (a continuation follows a prompt), got {each.tolist()}")
        out.start = each.long().to(ids.device)
        return out

    def bind(self, reference: object, batch: int) -> Bound:
        """Every input explains its whole continuation and, with ``per_token``, each of its G tokens.

        Args:
            reference: the logits (B, L, V) of the B unperturbed rows (or an output with ``.logits``).
            batch: B.

        Returns:
            The ``Bound`` target: labels (B, T) the target's index (0 = whole, 1 + g = token g).

        Raises:
            ValueError: the target was not prepared, or the rows are too short for the continuation.
        """
        if self.token_ids is None or self.start is None:
            raise ValueError(
                "Continuation needs each row's prompt length and continuation ids: use "
                "torchlime.text.explain_generation, or Continuation.prepared(continuation_ids, start)"
            )
        self.check(batch)
        logits = _logits(reference)
        g, first, dev, per_token = self.token_ids.shape[1], self._first, logits.device, self.per_token
        end = first + g if first is not None else int((self.start + g).max())
        if end > logits.shape[1]:
            raise ValueError(
                f"the continuation ends at position {end} but the model's logits cover {logits.shape[1]} positions"
            )
        ids = self.token_ids.to(dev)
        t = 1 + g if per_token else 1
        if first is not None and self._steps is not None:  # one start: the positions predicting y_g, every input's
            steps = self._steps.to(dev)
            positions, labels = steps[first - 1 : end - 1].expand(batch, g), steps[:t].expand(batch, t)
        else:  # (B, G): the positions predicting y_g, made once per call
            positions = self.start.to(dev).unsqueeze(1) + (torch.arange(g, device=dev) - 1)
            labels = torch.arange(t, device=dev).expand(batch, t)

        def score(out: object, rows: torch.Tensor) -> torch.Tensor:
            lg = _logits(out, rows.shape[0])
            c = rows.shape[0]
            if batch == 1:  # every row is input 0: broadcast views, no operator
                pos, tok = positions.expand(c, -1).to(lg.device), ids.expand(c, -1).to(lg.device).unsqueeze(2)
            else:
                r = rows.to(dev)
                pos = positions[:1].expand(c, -1) if first is not None else positions[r]
                pos, tok = pos.to(lg.device), ids[r].to(lg.device).unsqueeze(2)  # (c, G), (c, G, 1)
            window = None if first is None else lg[:, first - 1 : end - 1]
            if window is not None and window.is_contiguous():  # one row: the positions read are a view of it
                picked = window.float()  # (c, G, V)
            else:
                picked = lg.gather(1, pos.unsqueeze(2).expand(-1, -1, lg.shape[2])).float()  # (c, G, V)
            if not per_token:
                return picked.log_softmax(-1).gather(2, tok).squeeze(2).sum(1, keepdim=True)  # (c, 1)
            # (c, 1 + G): the tokens' log-probabilities written beside the slot of their sum (no concatenation)
            both = torch.empty(c, 1 + g, dtype=picked.dtype, device=picked.device)
            torch.gather(picked.log_softmax(-1), 2, tok, out=both[:, 1:].unsqueeze(2))
            torch.sum(both[:, 1:], 1, keepdim=True, out=both[:, :1])
            return both

        info = ContinuationInfo(ids, self.start.to(dev), per_token)
        return Bound(labels, torch.ones(batch, t, dtype=torch.bool, device=dev), score, info, all_valid=True)


def _logits(out: object, rows: int | None = None) -> torch.Tensor:
    lg = tensor_output(out, "Continuation", ("logits",), rows)
    if lg.ndim != 3:
        raise ValueError(f"Continuation needs next-token logits (rows, L, V) from the model, got {describe(lg)}")
    return lg
