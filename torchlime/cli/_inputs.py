"""INPUT files of the command line: images (PNG/JPEG), WAV audio and text, read into tensors.

* images: ``torchvision.io.decode_image`` (RGB or grey), floats in [0, 1] (16-bit PNGs too),
  optionally resized;
* audio: 8/16/24/32-bit PCM WAV with the standard library's ``wave`` module (no compiled
  audio library), floats in [-1, 1], (C, S); nothing is resampled;
* text: UTF-8 files, tokenised by a Hugging Face tokenizer (offline: a local folder or a name
  already in the cache) or split on whitespace and looked up in a vocabulary file.

Every failure is a ``CliError`` naming the file and what was expected.
"""

from __future__ import annotations

import json
import warnings
import wave
from pathlib import Path
from typing import NamedTuple, Optional

import numpy as np
import torch

from torchlime._util.checks import require
from torchlime.cli._common import CliError, one_line, short_error

EXTENSIONS = {".png": "image", ".jpg": "image", ".jpeg": "image", ".wav": "audio", ".txt": "text"}
#: vocabulary tokens that hide words (first found), mark unknown words, pad rows
MASK_TOKENS, UNK_TOKENS, PAD_TOKENS = ("[MASK]", "<mask>"), ("[UNK]", "<unk>"), ("[PAD]", "<pad>")
#: the largest id of a ``--vocab`` JSON ``{token: id}``: 2**24 - 1, 16.7 million tokens, far beyond any tokenizer's
#: vocabulary (a few hundred thousand); the id-ordered list it becomes then takes at most 128 MiB of references
MAX_VOCAB_ID = 2**24 - 1


def modality_of(paths: list[Path], forced: Optional[str]) -> str:
    """``--modality``, else the one modality the files' extensions name.

    Example:
        >>> modality_of([Path("a.PNG"), Path("b.jpg")], None)
        'image'
    """
    if forced is not None:
        return forced
    kinds: dict[str, Path] = {}
    for p in paths:
        kind = EXTENSIONS.get(p.suffix.lower())
        if kind is None:
            raise CliError(
                f"cannot tell the modality of {p} from its extension (.png/.jpg/.jpeg: image, .wav: audio, "
                f".txt: text); pass --modality image|audio|text"
            )
        kinds.setdefault(kind, p)
    if len(kinds) > 1:
        mixed = ", ".join(f"{k}: {p}" for k, p in kinds.items())
        raise CliError(f"the inputs mix modalities ({mixed}); one MODEL explains one modality, run them separately")
    return next(iter(kinds))


def _exists(path: Path) -> None:
    if not path.is_file():
        raise CliError(f"cannot read {path}: no such file" if not path.exists() else f"cannot read {path}: not a file")


def read_image(path: Path, channels: int = 3, size: Optional[tuple[int, int]] = None) -> torch.Tensor:
    """Float (C, H, W) in [0, 1] of a PNG/JPEG file (RGB for ``channels=3``, grey for 1), resized to ``size``."""
    io = require("torchvision.io", "image", "reading images on the command line")
    _exists(path)
    mode = io.ImageReadMode.RGB if channels == 3 else io.ImageReadMode.GRAY
    try:
        with warnings.catch_warnings():  # torchvision >= 0.29 announces TorchCodec on every decode
            warnings.simplefilter("ignore", DeprecationWarning)
            img: torch.Tensor = io.decode_image(str(path), mode=mode)
    except (RuntimeError, ValueError, OSError, TypeError) as err:
        raise CliError(f"cannot read image {path}: {short_error(err, 200)} (a PNG or JPEG file expected)") from None
    x = img.float() / (65535.0 if img.dtype == torch.uint16 else 255.0)
    if size is not None and tuple(x.shape[-2:]) != tuple(size):
        x = torch.nn.functional.interpolate(x[None], size=size, mode="bilinear", antialias=True, align_corners=False)[
            0
        ].clamp(0, 1)
    return x


def read_wav(path: Path) -> tuple[torch.Tensor, int]:
    """Float (C, S) in [-1, 1] and the sample rate of a PCM WAV file (8, 16, 24 or 32 bits)."""
    _exists(path)
    try:
        with wave.open(str(path), "rb") as f:
            n_ch, width, rate, n = f.getnchannels(), f.getsampwidth(), f.getframerate(), f.getnframes()
            raw = f.readframes(n)
    except (wave.Error, EOFError, OSError) as err:
        raise CliError(f"cannot read WAV {path}: {short_error(err, 200)} (a PCM WAV file expected)") from None
    n = len(raw) // (width * n_ch)
    if n == 0:
        raise CliError(f"cannot read WAV {path}: it holds no audio samples")
    raw = raw[: n * width * n_ch]
    if width == 1:
        data = (np.frombuffer(raw, np.uint8).astype(np.float32) - 128.0) / 128.0
    elif width == 2:
        data = np.frombuffer(raw, "<i2").astype(np.float32) / 32768.0
    elif width == 3:
        b = np.frombuffer(raw, np.uint8).reshape(-1, 3).astype(np.int32)
        v = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
        data = (np.where(v >= 1 << 23, v - (1 << 24), v)).astype(np.float32) / float(1 << 23)
    elif width == 4:
        data = np.frombuffer(raw, "<i4").astype(np.float32) / float(1 << 31)
    else:
        raise CliError(f"cannot read WAV {path}: {8 * width}-bit samples are not supported (8/16/24/32-bit PCM)")
    return torch.from_numpy(data.reshape(n, n_ch).T.copy()), rate


def read_text(path: Path) -> str:
    """The stripped UTF-8 text of a file (refused when empty)."""
    _exists(path)
    try:
        text = path.read_text(encoding="utf-8").strip()
    except UnicodeDecodeError as err:
        raise CliError(f"cannot read text {path}: not UTF-8 ({err.reason} at byte {err.start})") from None
    except OSError as err:
        raise CliError(f"cannot read text {path}: {one_line(err, 200)}") from None
    if not text:
        raise CliError(f"cannot explain {path}: it holds no text")
    return text


class Tokens(NamedTuple):
    """Token ids of B texts, padded to one length L, with what ``explain_tokens`` needs."""

    input_ids: torch.Tensor  # long (B, L)
    attention_mask: torch.Tensor  # long (B, L)
    word_ids: Optional[torch.Tensor]  # long (B, L) or None (every token a feature)
    special_ids: list[int]
    mask_id: int
    pad_id: int
    strings: list[list[str]]  # B lists of L token strings (for the HTML view)


def load_vocab(path: Path) -> list[str]:
    """Tokens in id order.

    Read from a text file (one token per line) or JSON (a list, ``{"tokens": [...]}`` or
    ``{token: id}`` with ids in [0, ``MAX_VOCAB_ID``], checked before the list is made).
    """
    _exists(path)
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix.lower() == ".json":
            data = json.loads(text)
            data = data.get("tokens", data) if isinstance(data, dict) else data
            if isinstance(data, dict):
                ids = {str(tok): int(i) for tok, i in data.items()}
                bad = [i for i in ids.values() if not 0 <= i <= MAX_VOCAB_ID]
                if bad:  # before the list of max(id) + 1 tokens is made
                    raise CliError(
                        f"--vocab {path}: token ids must be in [0, {MAX_VOCAB_ID}] (2**24 - 1), got {bad[0]}"
                    )
                tokens = [""] * (max(ids.values(), default=-1) + 1)
                for tok, i in ids.items():
                    tokens[i] = tok
            else:
                tokens = [str(t) for t in data]
        else:
            tokens = [line.rstrip("\r\n") for line in text.splitlines()]
    except (UnicodeDecodeError, ValueError, TypeError, AttributeError) as err:
        raise CliError(f"cannot read --vocab {path}: {one_line(err, 200)} (one token per line, or JSON)") from None
    if not tokens:
        raise CliError(f"--vocab {path} holds no tokens")
    return tokens


def _first(vocab: dict[str, int], names: tuple[str, ...]) -> Optional[int]:
    return next((vocab[n] for n in names if n in vocab), None)


def tokenize_with_vocab(texts: list[str], names: list[str], vocab_path: Path, lowercase: bool) -> Tokens:
    """Whitespace tokenisation over a vocabulary file; ``[X]`` / ``<x>`` tokens but the unknown one are special."""
    tokens = load_vocab(vocab_path)
    vocab = {t: i for i, t in enumerate(tokens)}
    unk, pad = _first(vocab, UNK_TOKENS), _first(vocab, PAD_TOKENS)
    mask = _first(vocab, MASK_TOKENS)
    mask = unk if mask is None else mask
    if mask is None:
        raise CliError(
            f"--vocab {vocab_path} has no {MASK_TOKENS[0]}/{MASK_TOKENS[1]} or {UNK_TOKENS[0]}/"
            f"{UNK_TOKENS[1]} token to hide words with"
        )
    pad = 0 if pad is None else pad
    rows: list[list[str]] = []
    for text, name in zip(texts, names):
        words = [w.lower() if lowercase and w not in vocab else w for w in text.split()]
        unknown = sorted({w for w in words if w not in vocab})
        if unknown and unk is None:
            raise CliError(
                f"{name}: {len(unknown)} word(s) not in --vocab {vocab_path} (e.g. {unknown[:5]}) and it "
                f"has no {UNK_TOKENS[0]}/{UNK_TOKENS[1]} token"
            )
        rows.append(words)
    length = max(len(r) for r in rows)
    ids = torch.full((len(rows), length), pad, dtype=torch.long)
    attn = torch.zeros((len(rows), length), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor([vocab.get(w, unk if unk is not None else pad) for w in r], dtype=torch.long)
        attn[i, : len(r)] = 1
    # the unknown token stands for a word of the text: it is perturbed like any other word
    special = sorted(
        {i for t, i in vocab.items() if len(t) > 2 and (t[0], t[-1]) in (("[", "]"), ("<", ">")) and i != unk}
    )
    strings = [r + [tokens[pad]] * (length - len(r)) for r in rows]
    return Tokens(ids, attn, None, special, mask, pad, strings)


def tokenize_with_hf(texts: list[str], name: str) -> Tokens:
    """Tokenise with a Hugging Face tokenizer loaded offline (a local folder or a cached name)."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise CliError("--tokenizer needs the package transformers: pip install transformers") from None
    try:
        tok = AutoTokenizer.from_pretrained(name, local_files_only=True)
    except Exception as err:  # noqa: BLE001 - transformers raises OSError, ValueError, ...
        raise CliError(
            f"--tokenizer {name} cannot be loaded offline: give a local folder (tokenizer.save_pretrained) "
            f"or a name already in the Hugging Face cache, torchlime never downloads "
            f"({type(err).__name__}: {one_line(err, 160)})"
        ) from None
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    if tok.pad_token_id is None:
        tok.pad_token = tok.convert_ids_to_tokens(pad)
    enc = tok(texts, padding=True, truncation=True, return_tensors="pt")
    word_ids = None
    if getattr(tok, "is_fast", False):
        from torchlime.text import word_ids_from_encoding

        word_ids = word_ids_from_encoding(enc, len(texts))
    mask = next((i for i in (tok.mask_token_id, tok.unk_token_id, tok.pad_token_id) if i is not None), None)
    if mask is None:
        raise CliError(f"--tokenizer {name} has no mask, unknown or padding token to hide words with")
    ids = enc["input_ids"].long()
    attn = enc.get("attention_mask", torch.ones_like(ids)).long()
    strings = [list(map(str, tok.convert_ids_to_tokens(row.tolist()))) for row in ids]
    special = sorted(set(tok.all_special_ids) - {tok.unk_token_id})  # an unknown word is still a word to explain
    return Tokens(ids, attn, word_ids, special, int(mask), int(pad), strings)


def feature_counts(t: Tokens) -> list[int]:
    """The number of explained features (words or tokens) of every text."""
    from torchlime.text import token_features

    feats = token_features(t.input_ids, t.attention_mask, t.word_ids, torch.tensor(t.special_ids, dtype=torch.long))
    return [int(row[row >= 0].unique().numel()) for row in feats]
