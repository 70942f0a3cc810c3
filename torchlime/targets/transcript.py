"""``Transcript``: explain a CTC speech recogniser by the likelihood of its transcript.

The model returns (rows, Tm, V) frame logits (wav2vec2-style; a tensor or ``.logits``). Target 0 is the
CTC log-likelihood of the transcript, log p(y | x), under each perturbed input (``torch.nn.functional.
ctc_loss`` over the whole chunk at once). With ``per_word=True`` each word of the transcript is a target
too, scored along the unperturbed input's best alignment: the summed log-probabilities of the labels that
the Viterbi path (computed in torch, batched over inputs) puts on that word's frames.

The transcript is the model's greedy decoding of the unperturbed input (the most likely label per frame,
repeats merged, blanks dropped), or the token ids given. Transcripts and word counts differ between
inputs: targets are padded and marked in ``Explanation.target_valid``.

The target reads the model's output only, so any door works: audio (``explain_waveform``,
``explain_spectrogram``) for speech, ``explain_image`` for a text recogniser reading an image of a line of
text (OCR), where ``per_word=True`` without ``word_delimiter`` gives one target per character.
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

import torch

from torchlime._util.checks import check_integer, check_positive_int, describe, from_numpy
from torchlime.targets._records import TranscriptInfo
from torchlime.targets.base import Bound, Target, pad_ragged, tensor_output


def greedy(logits: torch.Tensor, blank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy CTC decoding of (B, Tm, V) logits.

    Args:
        logits: (B, Tm, V).
        blank: the blank label.

    Returns:
        ``(labels, lengths)``: long (B, L) transcripts padded with ``blank``, and long (B,) their lengths.
    """
    best = logits.argmax(-1)  # (B, Tm)
    new = torch.ones_like(best, dtype=torch.bool)
    new[:, 1:] = best[:, 1:] != best[:, :-1]
    keep = new & (best != blank)
    lengths = keep.sum(1)
    width = int(lengths.max()) if lengths.numel() else 0  # the call's one host read of the transcript length
    order = (~keep).long().argsort(dim=1, stable=True)[:, :width]
    labels = best.gather(1, order)
    labels = torch.where(torch.arange(width, device=best.device) < lengths.unsqueeze(1), labels, blank)
    return labels, lengths


def viterbi(log_probs: torch.Tensor, labels: torch.Tensor, lengths: torch.Tensor, blank: int) -> torch.Tensor:
    """The best CTC alignment of each transcript: which transcript position every frame belongs to.

    Batched over inputs, a loop over frames (dynamic programming on the 2L+1 extended labels).

    Args:
        log_probs: (B, Tm, V) log-probabilities.
        labels: long (B, L) transcripts (padded).
        lengths: long (B,) their lengths.
        blank: the blank label.

    Returns:
        Long (B, Tm): the transcript position (0..L-1) of the label each frame emits, -1 for blank frames.
    """
    b, tm, _ = log_probs.shape
    n = labels.shape[1]
    if n == 0:
        return torch.full((b, tm), -1, dtype=torch.long, device=labels.device)
    s = 2 * n + 1
    ext = torch.full((b, s), blank, dtype=torch.long, device=labels.device)
    ext[:, 1::2] = labels
    emit = log_probs.gather(2, ext.unsqueeze(1).expand(b, tm, s))  # (B, Tm, S)
    neg = torch.finfo(log_probs.dtype).min / 4
    end = 2 * lengths + 1  # states in use
    in_use = torch.arange(s, device=labels.device) < end.unsqueeze(1)
    skip = torch.zeros(b, s, dtype=torch.bool, device=labels.device)
    skip[:, 3::2] = ext[:, 3::2] != ext[:, 1:-2:2]  # a label may skip the blank before it if it differs
    alpha = torch.full((b, s), neg, device=log_probs.device, dtype=log_probs.dtype)
    alpha[:, 0] = emit[:, 0, 0]
    alpha[:, 1] = torch.where(lengths > 0, emit[:, 0, 1], neg)
    back = torch.zeros(b, tm, s, dtype=torch.long, device=labels.device)
    idx = torch.arange(s, device=labels.device)
    for t in range(1, tm):
        stay = alpha
        step = torch.cat((alpha.new_full((b, 1), neg), alpha[:, :-1]), 1)
        jump = torch.where(skip, torch.cat((alpha.new_full((b, 2), neg), alpha[:, :-2]), 1), neg)
        cand = torch.stack((stay, step, jump), -1)  # (B, S, 3)
        best, arg = cand.max(-1)
        back[:, t] = idx - arg
        alpha = torch.where(in_use, best + emit[:, t], neg)
    last_blank = alpha.gather(1, (end - 1).unsqueeze(1)).squeeze(1)
    last_label = alpha.gather(1, (end - 2).clamp_min(0).unsqueeze(1)).squeeze(1)
    state = torch.where((last_blank >= last_label) | (lengths == 0), end - 1, end - 2)
    path = torch.empty(b, tm, dtype=torch.long, device=labels.device)
    for t in range(tm - 1, -1, -1):
        path[:, t] = state
        state = back[:, t].gather(1, state.unsqueeze(1)).squeeze(1)
    return torch.where(path % 2 == 1, path // 2, -1)


class Transcript(Target):
    """The log-likelihood of a transcript under each perturbed input (CTC), whole and per word.

    Args:
        token_ids: None (the greedy transcript of each unperturbed input), or the transcript's label ids:
            a list of ints shared by every input, or a list of B lists.
        blank: the CTC blank label.
        word_delimiter: the label that separates words (wav2vec2's "|"), for ``per_word``; None: every
            label is a word (one target per character of an OCR model's reading).
        per_word: a target per word besides the whole transcript (T = 1 + words).

    Example:
        >>> import torchlime
        >>> def asr(w):  # 4 frames of 3 labels (0 = blank): frame f says label 1 when its quarter is loud
        ...     loud = w.view(w.shape[0], 4, -1).abs().mean(-1)
        ...     return torch.stack((1 - loud, loud, torch.zeros_like(loud)), -1) * 5
        >>> waves = torch.rand(2, 64, generator=torch.Generator().manual_seed(0)) * 0.9
        >>> exp = torchlime.explain(asr, waves, torch.arange(64).view(1, 64) // 16,
        ...                         target=Transcript(token_ids=[1]), n_samples=64, generator=0)
        >>> exp.coef.shape
        torch.Size([2, 2, 4])
    """

    name = "Transcript"

    def __init__(
        self,
        token_ids: Union[None, Sequence[int], Sequence[Sequence[int]]] = None,
        blank: int = 0,
        word_delimiter: Optional[int] = None,
        per_word: bool = True,
    ) -> None:
        blank = check_positive_int(blank, "blank", minimum=0)  # label ids
        delimiter = None if word_delimiter is None else check_positive_int(word_delimiter, "word_delimiter", minimum=0)
        given = from_numpy(token_ids)
        parsed: Optional[list[torch.Tensor]] = None
        if given is not None:
            try:
                if isinstance(given, torch.Tensor):  # (n,) one transcript, (B, n) one per input
                    rows = [given] if given.ndim <= 1 else list(given)
                else:
                    rows = given if len(given) and isinstance(given[0], (list, tuple, torch.Tensor)) else [given]
                parsed = [torch.as_tensor(r, dtype=torch.long).reshape(-1) for r in rows]
            except (TypeError, ValueError, RuntimeError):
                raise TypeError(
                    f"`token_ids` must be a list of label ids (or one list per input), got {describe(given)}"
                ) from None
            if any(r.numel() == 0 for r in parsed):
                raise ValueError("`token_ids` must hold at least one label per transcript")
            if any(bool((r == blank).any()) for r in parsed):
                raise ValueError(f"`token_ids` must not hold the blank label {blank}")
        self.token_ids, self.blank = parsed, blank
        self.word_delimiter, self.per_word = delimiter, bool(per_word)

    def check(self, batch: int) -> None:
        """Refuse per-input transcripts of another batch size."""
        if self.token_ids is not None and len(self.token_ids) not in (1, batch):
            raise ValueError(f"`token_ids` holds {len(self.token_ids)} transcripts, not one per input ({batch})")

    def bind(self, reference: object, batch: int) -> Bound:
        """Fix each input's transcript, its best alignment and its words."""
        logits = _logits(reference)
        dev, (b, tm, v) = logits.device, logits.shape
        log_probs = logits.float().log_softmax(-1)
        if self.token_ids is None:
            labels, lengths = greedy(log_probs, self.blank)
        else:
            rows = self.token_ids * batch if len(self.token_ids) == 1 else self.token_ids
            check_integer(torch.cat(rows), "token_ids")
            if int(torch.cat(rows).max()) >= v:
                raise ValueError(f"`token_ids` must be labels in [0, {v}) of the model's {v} outputs")
            labels = pad_ragged([r.to(dev) for r in rows], self.blank)
            lengths = torch.tensor([r.numel() for r in rows], device=dev)
        position = viterbi(log_probs, labels, lengths, self.blank)  # (B, Tm): transcript position per frame
        if self.per_word:
            if self.word_delimiter is None:
                word_of_pos = torch.arange(labels.shape[1], device=dev).expand(b, -1)
                is_word = torch.arange(labels.shape[1], device=dev) < lengths.unsqueeze(1)
            else:
                delim = labels == self.word_delimiter
                word_of_pos = delim.long().cumsum(1)
                is_word = ~delim & (torch.arange(labels.shape[1], device=dev) < lengths.unsqueeze(1))
            words = torch.where(is_word, word_of_pos, -1)
            n_words = int(words.amax()) + 1 if words.numel() else 0  # one host read
            frame_word = torch.where(position >= 0, words.gather(1, position.clamp_min(0)), -1)  # (B, Tm)
            assign = torch.nn.functional.one_hot(frame_word.clamp_min(-1) + 1, n_words + 1)[..., 1:].float()
            assign = assign.transpose(1, 2)  # (B, W, Tm)
            word_valid = assign.sum(-1) > 0
        else:
            assign = torch.zeros(b, 0, tm, device=dev)
            word_valid = torch.zeros(b, 0, dtype=torch.bool, device=dev)
        path_label = torch.where(position >= 0, labels.gather(1, position.clamp_min(0)), self.blank)  # (B, Tm)
        valid = torch.cat((lengths.unsqueeze(1) > 0, word_valid), 1)
        blank = self.blank

        def score(out: object, rows: torch.Tensor) -> torch.Tensor:
            lp = _logits(out, rows.shape[0]).float().log_softmax(-1)  # (c, Tm, V)
            rows = rows.to(dev)
            c = lp.shape[0]
            total = -torch.nn.functional.ctc_loss(
                lp.transpose(0, 1),
                labels[rows],
                torch.full((c,), lp.shape[1], dtype=torch.long, device=dev),
                lengths[rows],
                blank=blank,
                reduction="none",
                zero_infinity=True,
            )
            frame = lp.gather(2, path_label[rows].unsqueeze(-1)).squeeze(-1)  # (c, Tm) along the alignment
            per_word = torch.einsum("cwt,ct->cw", assign[rows], frame)
            return torch.cat((total.unsqueeze(1), per_word), 1) * valid[rows]

        t = valid.shape[1]
        target_labels = torch.where(valid, torch.arange(t, device=dev), -1)
        kept = labels.tolist()  # plain data for the record, read once per call
        info = TranscriptInfo([row[:n] for row, n in zip(kept, lengths.tolist())])
        return Bound(target_labels, valid, score, info)


def _logits(out: object, rows: int | None = None) -> torch.Tensor:
    logits = tensor_output(out, "Transcript", ("logits",), rows)
    if logits.ndim != 3:
        raise ValueError(
            f"Transcript needs (rows, frames, labels) logits from the model, got shape {tuple(logits.shape)}"
        )
    return logits
