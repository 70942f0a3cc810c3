"""``torchlime explain MODEL INPUT... --out DIR``: explain image, audio or text files.

Every input is read first (``_cli_inputs``), the model loaded (``_cli_model``), the explanations
computed (one call per group of inputs of one shape; input k of the command line is explained
with ``index=k``, so its masks depend only on the seed and its position), and only then is the
output folder written: per input ``NAME.explanation.pt`` (``Explanation.save`` of that input
alone), a picture (``NAME.png``: the four image panels, or the spectrogram with the
coefficients), for audio ``NAME.original.wav`` / ``NAME.topK.wav`` / ``NAME.complement.wav``,
for text ``NAME.html``; and ``summary.json`` for the whole run. The top K features, listed,
drawn and played, are those of largest |weight| (``summary.json``'s ``top_by``: "abs"), with
their signed weights: positive supports the target, negative opposes it.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path
from typing import Callable, Optional, TypedDict

import torch
from torch import nn

from torchlime.cli._args import Parser, explain_args, file_arg, image_args, int_at_least, model_command
from torchlime.cli._common import (
    CliError,
    Target,
    check_top_k,
    collected_warnings,
    model_failure,
    normalization,
    parse_target,
    resolve_device,
    sync,
    unique_stems,
)
from torchlime.cli._inputs import (
    feature_counts,
    modality_of,
    read_image,
    read_text,
    read_wav,
    tokenize_with_hf,
    tokenize_with_vocab,
)
from torchlime.cli._model import load_model
from torchlime.cli._output import output_folder
from torchlime.cli._write import Group, Record, has_matplotlib, write_group
from torchlime.engine.explanation import Explanation


def add_parser(sub: argparse._SubParsersAction[Parser]) -> None:
    """The ``explain`` command's options."""
    p = model_command(
        sub,
        "explain",
        "explain image, audio or text files with your model; write pictures, explanation files and a JSON summary",
    )
    p.add_argument("inputs", metavar="INPUT", nargs="+", help="PNG/JPEG images, WAV files or UTF-8 text files")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument(
        "--top-k",
        type=int_at_least(1),
        default=3,
        help="features of largest |weight| shown and listed per input (default: %(default)s)",
    )
    p.add_argument("--modality", choices=["image", "audio", "text"], help="default: from the file extensions")
    explain_args(p, "top", "top (the top class, default), a class index, topK or all")
    image_args(p)
    p.add_argument("--sample-rate", type=int_at_least(1), help="audio: the rate the model expects (never resampled)")
    p.add_argument(
        "--audio-features",
        choices=["time_frequency", "time"],
        default="time_frequency",
        help="audio: STFT cells or time segments (default: %(default)s)",
    )
    p.add_argument("--time-segments", type=int_at_least(1), help="audio: time slots (default 5, or 10 for time)")
    p.add_argument("--freq-segments", type=int_at_least(1), default=4, help="audio: frequency bands (default: 4)")
    p.add_argument("--n-fft", type=int_at_least(2), default=512, help="audio: STFT size (default: %(default)s)")
    p.add_argument(
        "--tokenizer",
        metavar="NAME_OR_FOLDER",
        help="text: a Hugging Face tokenizer, offline (a local folder or a cached name)",
    )
    file_arg(p, "--vocab", "text: split on whitespace, ids from this vocabulary (one token per line, or JSON)")
    p.add_argument("--lowercase", action="store_true", help="text with --vocab: lower-case unknown words")
    p.set_defaults(parser=p)


def _run_model(fn: Callable[[], Explanation], what: str) -> Explanation:
    try:
        return fn()
    except Exception as err:  # noqa: BLE001 - whatever the user's model raises becomes one line
        raise model_failure(err, what) from None


class _Options(TypedDict):
    """The options every front door of ``explain`` gets from the command line."""

    n_samples: int
    target: Target
    generator: int
    batch_size: Optional[int]
    softmax: bool
    index: torch.Tensor


def _common(args: argparse.Namespace, target: Target, positions: list[int], device: torch.device) -> _Options:
    return dict(
        n_samples=args.n_samples,
        target=target,
        generator=args.seed,
        batch_size=args.batch_size,
        softmax=args.softmax,
        index=torch.tensor(positions, device=device),
    )


def _groups(items: list[torch.Tensor]) -> dict[tuple[int, ...], list[int]]:
    out: dict[tuple[int, ...], list[int]] = {}
    for k, x in enumerate(items):
        out.setdefault(tuple(x.shape), []).append(k)
    return out


def explain_images(
    model: nn.Module, args: argparse.Namespace, paths: list[Path], target: Target, device: torch.device
) -> list[Group]:
    """Segment every group of equal-size images, check ``--top-k``, then explain each group."""
    from torchlime.image import default_segments, explain_image
    from torchlime.image.segments import resolve_segments

    size = tuple(args.size) if args.size else None
    images = [read_image(p, args.channels, size) for p in paths]
    normalize = normalization(args)
    plans = []
    for pos in _groups(images).values():
        x = torch.stack([images[k] for k in pos]).to(device)
        count = args.n_segments
        if count == "auto":  # the rule of explain_image, for this group's size and the samples asked
            count = default_segments(args.n_samples, *x.shape[-2:])
        seg = resolve_segments(x, args.segments, n_segments=count)
        counts = [int(s.unique().numel()) for s in seg]
        check_top_k(args.top_k, counts, "segments", [str(paths[k]) for k in pos])
        plans.append((pos, x, seg))
    return [
        Group(
            pos,
            x,
            _run_model(
                functools.partial(
                    explain_image,
                    model,
                    x,
                    segments=seg,
                    normalize=normalize,
                    baseline=args.baseline,
                    **_common(args, target, pos, device),
                ),
                f"images of shape {tuple(x.shape[1:])}",
            ),
        )
        for pos, x, seg in plans
    ]


def explain_audio(
    model: nn.Module, args: argparse.Namespace, paths: list[Path], target: Target, device: torch.device
) -> list[Group]:
    """Read the WAVs (one sample rate, never resampled), then explain each group of one length."""
    from torchlime.audio import explain_waveform

    read = [read_wav(p) for p in paths]
    rate = args.sample_rate
    for p, (_, r) in zip(paths, read):
        if rate is not None and r != rate:
            raise CliError(
                f"{p} has a sample rate of {r} Hz, --sample-rate is {rate} Hz; resample it first "
                f"(torchlime does not resample)"
            )
        if rate is None and r != read[0][1]:
            raise CliError(
                f"the WAV files have different sample rates ({paths[0]}: {read[0][1]} Hz, {p}: {r} Hz); "
                f"resample them to one rate or explain them separately"
            )
    rate = rate or read[0][1]
    tf = args.audio_features == "time_frequency"
    time_segments = args.time_segments or (5 if tf else 10)
    n_features = time_segments * (args.freq_segments if tf else 1)
    check_top_k(args.top_k, [n_features], "segments")
    waves = [w[0] if w.shape[0] == 1 else w for w, _ in read]
    out = []
    for shape, pos in _groups(waves).items():
        x = torch.stack([waves[k] for k in pos]).to(device)
        kw = (
            dict(
                segments=args.audio_features,
                time_segments=time_segments,
                freq_segments=args.freq_segments,
                n_fft=args.n_fft,
            )
            if tf
            else dict(segments="time", time_segments=time_segments)
        )
        exp = _run_model(
            functools.partial(explain_waveform, model, x, sample_rate=rate, **kw, **_common(args, target, pos, device)),
            f"audio of shape {shape}",
        )
        out.append(Group(pos, x, exp))
    return out


def explain_texts(
    model: nn.Module, args: argparse.Namespace, paths: list[Path], target: Target, device: torch.device
) -> list[Group]:
    """Tokenise every text into one padded batch and explain it over words (or tokens)."""
    from torchlime.text import explain_tokens

    texts = [read_text(p) for p in paths]
    if args.tokenizer:
        tokens = tokenize_with_hf(texts, args.tokenizer)
    elif args.vocab:
        tokens = tokenize_with_vocab(texts, [str(p) for p in paths], args.vocab, args.lowercase)
    else:
        raise CliError("text inputs need --tokenizer NAME_OR_FOLDER (a Hugging Face tokenizer) or --vocab FILE")
    counts = feature_counts(tokens)
    check_top_k(args.top_k, counts, "words", [str(p) for p in paths])
    pos = list(range(len(paths)))
    word_ids = None if tokens.word_ids is None else tokens.word_ids.to(device)
    exp = _run_model(
        lambda: explain_tokens(
            model,
            tokens.input_ids.to(device),
            attention_mask=tokens.attention_mask.to(device),
            word_ids=word_ids,
            special_ids=tokens.special_ids,
            mode="replace",
            mask_id=tokens.mask_id,
            pad_id=tokens.pad_id,
            **_common(args, target, pos, device),
        ),
        f"token ids of shape {tuple(tokens.input_ids.shape)}",
    )
    return [Group(pos, tokens, exp)]


EXPLAINERS = {"image": explain_images, "audio": explain_audio, "text": explain_texts}


def run(args: argparse.Namespace) -> int:
    """The ``explain`` command: read, load, explain, then write the folder (see the module docstring)."""
    device = resolve_device(args.device)
    target = parse_target(args.target)
    paths = [Path(p) for p in args.inputs]
    modality = modality_of(paths, args.modality)
    model, kind = load_model(args.model, args.weights, device)
    notes: list[str] = []
    with collected_warnings(notes):
        sync(device)
        t0 = time.perf_counter()
        groups = EXPLAINERS[modality](model, args, paths, target, device)
        sync(device)
        seconds = time.perf_counter() - t0
    keep = tuple(Path(f) for f in (args.model, args.weights) if f is not None)
    names = unique_stems(paths, Path(args.out), keep)
    written: dict[int, Record] = {}
    with output_folder(args.out) as out, collected_warnings(notes):
        for g in groups:
            for j, k in enumerate(g.positions):
                written[k] = write_group(modality, out, g, j, names[k], args)
                written[k]["file"] = str(paths[k])
        records = [written[k] for k in range(len(paths))]  # the groups' positions cover every input once
        summary = dict(
            command="explain",
            model=args.model,
            model_kind=kind,
            weights=None if args.weights is None else str(args.weights),
            modality=modality,
            device=str(device),
            n_samples=args.n_samples,
            seed=args.seed,
            target=args.target,
            top_k=args.top_k,
            top_by="abs",
            seconds=seconds,
            seconds_per_input=seconds / len(paths),
            inputs=records,
            warnings=notes,
        )
        out.json("summary.json", summary)
    n_pictures = sum(len(r["pictures"]) for r in records)
    n_sounds, n_pages = sum(len(r["sounds"]) for r in records), sum(r["html"] is not None for r in records)
    print(
        f"explained {len(paths)} {modality} input(s) with {args.n_samples} samples each on {device} in "
        f"{seconds:.2f} s ({1000 * seconds / len(paths):.0f} ms per input)"
    )
    for r in records:
        r2 = ", ".join(f"{v:.2f}" for v in r["weighted_r2"])
        flag = f"  UNRELIABLE: {r['unreliable']}" if r["unreliable"] else ""
        tops = ", ".join(f"{n} ({w:+.3g})" for n, w in zip(r["top_names"][0], r["top_weights"][0]))
        print(f"  {r['file']}: target {r['target']} weighted R^2 {r2} top-{args.top_k} by |weight|: {tops}{flag}")
    for note in notes:
        print(f"torchlime explain: warning: {note}", file=sys.stderr)
    files = {
        "image": f"{n_pictures} picture(s)",
        "audio": f"{n_pictures} picture(s), {n_sounds} WAV file(s)",
        "text": f"{n_pages} HTML page(s)",
    }[modality]
    missing = (
        " (install matplotlib for pictures: torchlime[viz])" if modality != "text" and not has_matplotlib() else ""
    )
    print(f"wrote {len(paths)} explanation file(s), {files} and summary.json to {args.out}{missing}")
    return 0
