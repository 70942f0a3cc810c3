"""Synthetic sentiment sentences with a planted rationale, for the text model, tests and benchmarks.

Every sentence is ``[CLS] units... [SEP] [PAD]...`` over a fixed vocabulary.
The units are 8-20 *filler* words drawn uniformly from a neutral list
(carrying no information about the label) and 1-3 *sentiment phrases*, placed
at random among them. A phrase is a sentiment word, or ``not`` followed by a
sentiment word (probability 0.3). The label (0 negative, 1 positive) is drawn
first and every phrase agrees with it: a plain phrase uses a word of the
label's polarity, a negated phrase a word of the opposite polarity ("not bad"
is positive). So

* the label is decided by the planted phrases alone, and
* order matters: "not" flips the word right after it, which a bag-of-words
  model cannot represent (it needs token positions).

``rationale`` marks exactly the phrase tokens (``not`` included): the ground
truth an explanation should point at. Generation is vectorised over sentences,
uses only its own ``torch.Generator`` and is fully determined by ``(n, seed)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

SPECIALS: tuple[str, ...] = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
PAD, UNK, CLS, SEP, MASK = range(5)
NEGATOR = "not"
POSITIVE: tuple[str, ...] = (
    "good",
    "great",
    "excellent",
    "wonderful",
    "superb",
    "delightful",
    "brilliant",
    "charming",
    "enjoyable",
    "moving",
    "beautiful",
    "fantastic",
    "clever",
    "gripping",
    "touching",
    "memorable",
    "stunning",
    "fun",
    "lovely",
    "impressive",
    "satisfying",
    "witty",
    "fresh",
    "solid",
)
NEGATIVE: tuple[str, ...] = (
    "bad",
    "awful",
    "terrible",
    "boring",
    "dull",
    "poor",
    "weak",
    "clumsy",
    "tedious",
    "bland",
    "horrible",
    "messy",
    "lifeless",
    "annoying",
    "dreadful",
    "painful",
    "forgettable",
    "shallow",
    "silly",
    "flat",
    "stale",
    "sloppy",
    "disappointing",
    "mediocre",
)
FILLER: tuple[str, ...] = (
    "the",
    "a",
    "an",
    "this",
    "that",
    "movie",
    "film",
    "story",
    "plot",
    "script",
    "actor",
    "actress",
    "cast",
    "director",
    "scene",
    "scenes",
    "ending",
    "music",
    "score",
    "camera",
    "dialogue",
    "set",
    "was",
    "is",
    "were",
    "seems",
    "felt",
    "looks",
    "became",
    "remains",
    "and",
    "but",
    "or",
    "so",
    "with",
    "of",
    "in",
    "on",
    "at",
    "for",
    "from",
    "about",
    "after",
    "before",
    "during",
    "through",
    "it",
    "its",
    "they",
    "their",
    "we",
    "our",
    "i",
    "my",
    "you",
    "he",
    "she",
    "his",
    "her",
    "some",
    "many",
    "most",
    "every",
    "each",
    "two",
    "three",
    "first",
    "last",
    "new",
    "old",
    "long",
    "short",
    "early",
    "late",
    "night",
    "day",
    "city",
    "house",
    "road",
    "river",
    "war",
    "family",
    "friend",
    "friends",
    "time",
    "year",
    "years",
    "minutes",
    "hour",
    "screen",
    "theater",
    "audience",
    "crowd",
    "critics",
    "studio",
    "sequel",
    "version",
    "character",
    "characters",
    "role",
    "roles",
    "voice",
    "light",
    "color",
    "sound",
    "pace",
    "tone",
    "style",
    "genre",
    "drama",
    "comedy",
    "thriller",
    "mostly",
    "often",
    "again",
    "almost",
    "rather",
    "quite",
    "really",
    "also",
    "still",
    "just",
)
VOCAB: tuple[str, ...] = SPECIALS + (NEGATOR,) + POSITIVE + NEGATIVE + FILLER
NOT_ID = len(SPECIALS)
POS_IDS = torch.arange(NOT_ID + 1, NOT_ID + 1 + len(POSITIVE))
NEG_IDS = torch.arange(int(POS_IDS[-1]) + 1, int(POS_IDS[-1]) + 1 + len(NEGATIVE))
FILLER_IDS = torch.arange(int(NEG_IDS[-1]) + 1, len(VOCAB))
MAX_LENGTH = 32
MAX_FILLER, MAX_PHRASES, P_NEGATED = 20, 3, 0.3


@dataclass
class TextBatch:
    """Sentences as tensors.

    Attributes:
        input_ids: long (n, L) ids into ``VOCAB`` (CLS first, SEP last, PAD after).
        attention_mask: long (n, L) 1 on CLS..SEP.
        labels: long (n,) 0 negative, 1 positive.
        rationale: bool (n, L) the planted phrase tokens.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    labels: torch.Tensor
    rationale: torch.Tensor

    def __len__(self) -> int:
        return self.input_ids.shape[0]


def make_text_dataset(n: int, seed: int = 0, length: int = MAX_LENGTH) -> TextBatch:
    """Generate ``n`` sentences deterministically from ``seed`` (see the module docstring).

    Example:
        >>> data = make_text_dataset(4, seed=0)
        >>> data.input_ids.shape, bool((data.rationale & (data.attention_mask == 0)).any())
        (torch.Size([4, 32]), False)
    """
    if length < MAX_FILLER + 2 * MAX_PHRASES + 2:
        raise ValueError(f"`length` must be >= {MAX_FILLER + 2 * MAX_PHRASES + 2}, got {length}")
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 2, (n,), generator=g)
    n_fill = torch.randint(8, MAX_FILLER + 1, (n,), generator=g)
    n_phr = torch.randint(1, MAX_PHRASES + 1, (n,), generator=g)
    negated = torch.rand(n, MAX_PHRASES, generator=g) < P_NEGATED
    n_units = MAX_FILLER + MAX_PHRASES
    units = torch.arange(n_units)
    valid = units < (n_fill + n_phr).unsqueeze(1)
    # phrase units: the n_phr smallest of random keys among the valid units
    noise = torch.rand(n, n_units, generator=g).masked_fill(~valid, 2.0)
    is_phr = noise.argsort(1).argsort(1) < n_phr.unsqueeze(1)
    phrase = (is_phr.long().cumsum(1) - 1).clamp_min(0)  # which phrase a unit is
    neg_unit = is_phr & negated.gather(1, phrase)
    # a plain phrase agrees with the label, a negated one has the opposite polarity
    positive_word = (labels.unsqueeze(1) == 1) ^ neg_unit
    pos_pick = POS_IDS[torch.randint(0, len(POS_IDS), (n, n_units), generator=g)]
    neg_pick = NEG_IDS[torch.randint(0, len(NEG_IDS), (n, n_units), generator=g)]
    word = torch.where(positive_word, pos_pick, neg_pick)
    filler = FILLER_IDS[torch.randint(0, len(FILLER_IDS), (n, n_units), generator=g)]
    size = (1 + neg_unit.long()) * valid
    start = 1 + size.cumsum(1) - size  # position of each unit's first token (after CLS)
    first = torch.where(neg_unit, torch.full_like(word, NOT_ID), torch.where(is_phr, word, filler))
    dump = torch.full_like(start, length)  # invalid units write to a spare column
    ids = torch.full((n, length + 1), PAD, dtype=torch.long)
    ids.scatter_(1, torch.where(valid, start, dump), first)
    ids.scatter_(1, torch.where(neg_unit, start + 1, dump), word)
    rat = torch.zeros(n, length + 1, dtype=torch.bool)
    rat.scatter_(1, torch.where(is_phr, start, dump), True)
    rat.scatter_(1, torch.where(neg_unit, start + 1, dump), True)
    content = size.sum(1)
    ids[:, 0] = CLS
    ids.scatter_(1, (content + 1).unsqueeze(1), SEP)
    attn = (torch.arange(length + 1) <= (content + 1).unsqueeze(1)).long()
    return TextBatch(ids[:, :length], attn[:, :length], labels, rat[:, :length])


def decode(ids: torch.Tensor, vocab: tuple[str, ...] = VOCAB, skip_pad: bool = True) -> list[str]:
    """Token strings of one row (L,) of ids."""
    return [vocab[i] for i in ids.tolist() if not (skip_pad and i == PAD)]


def encode(words: list[str], length: int = MAX_LENGTH, vocab: tuple[str, ...] = VOCAB) -> torch.Tensor:
    """Long (1, length) ids of ``[CLS] words [SEP]`` padded (unknown words -> [UNK])."""
    index = {w: i for i, w in enumerate(vocab)}
    ids = [CLS] + [index.get(w, UNK) for w in words] + [SEP]
    if len(ids) > length:
        raise ValueError(f"`words` must have at most {length - 2} words, got {len(words)}")
    return torch.tensor([ids + [PAD] * (length - len(ids))], dtype=torch.long)
