"""``torchlime explain-dataset MODEL FOLDER --out DIR``: explain a folder of images, resumably.

FOLDER has torchvision's ImageFolder layout: one sub-folder per class (classes in sorted order,
the label of an image is its class's position), images (PNG/JPEG) anywhere below it, sorted by
path. The images go through ``torchlime.dataset.explain_dataset`` with ``torchlime.Images``: the
results are safetensors shards plus ``index.json`` in DIR (``torchlime.dataset.load_results(DIR)``
reads them), and running the same command again after an interruption computes only the missing
shards: it says so on stderr ("resuming: 3 of 5 shards already done (120 explanations kept)"), and
at the end on stdout how many explanations and shards DIR holds, how many were computed now.
``DIR/dataset.json`` maps the global index of every input back to its file and class (and records
how the images were read: channels, size). The shards keep each image's segment map, so that
``torchlime show DIR --index I --data FOLDER`` draws any explanation; with ``--keep-inputs`` they
keep the images too, and ``show`` needs no FOLDER. By default every image is explained for its own
label (``--target label``); as a folder's classes need not be the model's, the command then measures how
many labels are the model's top class (one more forward pass per image), warns below one half (naming
``--target top``) and records the share in ``dataset.json`` (``label_agreement``) and its closing line.
``--inputs-per-step`` images go to one explanation call, ``--batch-size`` rows to one model call (as in
``explain``: the ``Explainer``'s ``batch_size``).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import shutil
import sys
from pathlib import Path
from typing import Iterator, Optional, Union

import torch

from torchlime.cli._args import Parser, explain_args, image_args, int_at_least, memory, model_command
from torchlime.cli._common import (
    CliError,
    check_outside,
    collected_warnings,
    normalization,
    parse_target,
    resolve_device,
)
from torchlime.cli._inputs import EXTENSIONS, read_image
from torchlime.cli._model import load_model
from torchlime.cli._output import output_folder
from torchlime.stages.forward.model import eval_mode, select_output


def add_parser(sub: argparse._SubParsersAction[Parser]) -> None:
    """The ``explain-dataset`` command's options.

    The model and how to explain are those of ``explain``; the inputs are an image folder, the output a result
    folder of shards that a rerun resumes.
    """
    p = model_command(
        sub,
        "explain-dataset",
        "explain a folder of images (ImageFolder layout) into resumable shards (torchlime.dataset)",
    )
    p.add_argument("folder", metavar="FOLDER", help="class sub-folders of PNG/JPEG images; label = class index")
    p.add_argument("--out", type=Path, required=True, help="result folder (run again to resume)")
    explain_args(p, "label", "label (each image's class, default), top, a class index, topK or all")
    p.add_argument(
        "--inputs-per-step",
        type=int_at_least(1),
        default=32,
        help="images per explanation call (default: %(default)s)",
    )
    p.add_argument(
        "--shard-size", type=int_at_least(1), default=1024, help="explanations per shard file (default: %(default)s)"
    )
    p.add_argument("--max-memory", type=memory, help="CUDA memory of a chunk: a fraction of the device (<= 1) or bytes")
    p.add_argument("--workers", type=int_at_least(0), default=0, help="image-reading worker processes")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--keep-inputs",
        action="store_true",
        help="also store the images in the shards (4 x C x H x W bytes each), so `torchlime show` needs no FOLDER",
    )
    image_args(p)
    p.set_defaults(parser=p)


class ImageFolderFiles(torch.utils.data.Dataset[tuple[torch.Tensor, int]]):
    """The images of an ImageFolder tree as ``(image (C, H, W) in [0, 1], label)`` pairs.

    Args:
        root: the folder of class sub-folders.
        channels: 3 (RGB) or 1 (grey).
        size: (H, W) every image is resized to; None: every image must have the first one's size.
    """

    def __init__(self, root: Path, channels: int = 3, size: Optional[tuple[int, int]] = None) -> None:
        if not root.is_dir():
            raise CliError(f"FOLDER {root} is not a folder" if root.exists() else f"FOLDER {root}: no such folder")
        self.classes = sorted(d.name for d in root.iterdir() if d.is_dir() and not d.name.startswith("."))
        if not self.classes:
            raise CliError(f"FOLDER {root} has no class sub-folders (ImageFolder layout: FOLDER/CLASS/IMAGE.png)")
        self.files: list[tuple[Path, int]] = []
        for label, name in enumerate(self.classes):
            found = sorted(
                p for p in (root / name).rglob("*") if p.is_file() and EXTENSIONS.get(p.suffix.lower()) == "image"
            )
            self.files += [(p, label) for p in found]
        if not self.files:
            raise CliError(f"FOLDER {root} holds no PNG or JPEG images in its class sub-folders {self.classes[:5]}")
        self.root, self.channels, self.size = root, channels, size
        first = read_image(self.files[0][0], channels, size)
        self.shape = tuple(first.shape)

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        path, label = self.files[i]
        x = read_image(path, self.channels, self.size)
        if tuple(x.shape) != self.shape:
            raise CliError(
                f"{path} has shape {tuple(x.shape)}, the first image {self.files[0][0]} has {self.shape}; "
                f"pass --size H W to resize every image"
            )
        return x, label


def _finished_shards(out: Path) -> bool:
    return out.is_dir() and any(out.glob("shard-*.safetensors"))


class _Status(logging.Handler):
    """The run's status lines (logger ``torchlime.dataset``) on stderr as the command's own; what was kept before.

    Args:
        prog: the command's name, the lines' prefix.
    """

    def __init__(self, prog: str) -> None:
        super().__init__(logging.INFO)
        self.prog, self.done_before = prog, 0

    def emit(self, record: logging.LogRecord) -> None:
        """Print a resuming (or nothing-to-do) line; remember the shards done before the run."""
        event = getattr(record, "event", None)
        if event in ("resume", "complete"):
            self.done_before = int(getattr(record, "shards_done", 0))
            print(f"{self.prog}: {record.getMessage()}", file=sys.stderr)


@contextlib.contextmanager
def _status(prog: str) -> Iterator[_Status]:
    """Route ``torchlime.dataset``'s INFO lines to a ``_Status`` handler while the run lasts."""
    logger, handler = logging.getLogger("torchlime.dataset"), _Status(prog)
    level, propagate = logger.level, logger.propagate
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


#: below this share of images whose folder label is the model's top class, the labels are likely not its classes
AGREEMENT = 0.5


def label_agreement(
    model: torch.nn.Module,
    data: torch.utils.data.Dataset[tuple[torch.Tensor, int]],
    device: torch.device,
    normalize: Optional[tuple[tuple[float, ...], tuple[float, ...]]],
    step: int,
) -> float:
    """The share of images whose label (their class sub-folder's position) is the model's top class.

    One forward pass per image, ``step`` images a call, in eval mode: a small part of an explanation's cost.

    Args:
        model: the model, on ``device``.
        data: (image (C, H, W), label) pairs.
        device: where the model runs.
        normalize: ``(mean, std)`` per channel the model expects, or None.
        step: images per model call.

    Returns:
        A share in [0, 1] (1.0 for no images).
    """
    hits = total = 0
    with torch.inference_mode(), eval_mode(model):
        for x, labels in torch.utils.data.DataLoader(data, batch_size=step):
            x = x.to(device)
            if normalize is not None:
                mean, std = (torch.tensor(v, dtype=x.dtype, device=device).view(1, -1, 1, 1) for v in normalize)
                x = (x - mean) / std
            top = select_output(model(x), None, x.shape[0]).argmax(1).cpu()
            hits, total = hits + int((top == labels).sum()), total + len(labels)
    return hits / total if total else 1.0


def run(args: argparse.Namespace) -> int:
    """The ``explain-dataset`` command (see the module docstring)."""
    from torchlime import Call, Explainer, Images
    from torchlime.dataset import explain_dataset, load_results

    device = resolve_device(args.device)
    target = parse_target(args.target, allow_label=True)
    if args.out.exists() and not args.out.is_dir():
        raise CliError(f"--out {args.out} is a file, not a folder")
    check_outside(args.out, Path(args.folder), "--out", "FOLDER")
    model, _ = load_model(args.model, args.weights, device)
    data = ImageFolderFiles(Path(args.folder), args.channels, tuple(args.size) if args.size else None)
    normalize = normalization(args)
    modality = Images(segments=args.segments, n_segments=args.n_segments, normalize=normalize)
    explainer = Explainer(baseline=args.baseline, max_memory=args.max_memory, batch_size=args.batch_size)
    call = Call(n_samples=args.n_samples, target=target, softmax=args.softmax, generator=args.seed)
    source: Union[ImageFolderFiles, torch.utils.data.DataLoader[tuple[torch.Tensor, int]]] = (
        data
        if not args.workers
        else torch.utils.data.DataLoader(data, batch_size=args.inputs_per_step, num_workers=args.workers)
    )
    created = not args.out.exists()
    notes: list[str] = []
    try:
        with collected_warnings(notes), _status(args.parser.prog) as status:
            explain_dataset(
                model,
                source,
                args.out,
                modality=modality,
                explainer=explainer,
                call=call,
                inputs_per_step=args.inputs_per_step,
                shard_size=args.shard_size,
                device=device,
                progress=not args.no_progress,
                keep=("features", "inputs") if args.keep_inputs else ("features",),
            )
    except BaseException:
        if created and not _finished_shards(args.out):
            shutil.rmtree(args.out, ignore_errors=True)
        raise
    agreement = label_agreement(model, data, device, normalize, args.inputs_per_step) if target == "label" else None
    if agreement is not None and agreement < AGREEMENT:
        notes.append(
            f"the folder's labels are the model's top class for only {agreement:.0%} of the images: its class "
            f"sub-folders ({len(data.classes)}, sorted by name) are probably not the model's classes; "
            f"--target top explains each image's top class instead"
        )
    with output_folder(args.out) as output:  # the result folder: dataset.json never written through a link
        output.json(
            "dataset.json",
            dict(
                root=str(data.root),
                classes=data.classes,
                files=[str(p.relative_to(data.root)) for p, _ in data.files],
                labels=[label for _, label in data.files],
                channels=data.channels,
                size=None if data.size is None else list(data.size),
                label_agreement=agreement,
            ),
        )
    res = load_results(args.out)
    for note in notes:
        print(f"torchlime explain-dataset: warning: {note}", file=sys.stderr)
    shards, before = len(res.entries), status.done_before
    kept = f" ({shards - before} computed now, {before} kept from before)" if before else ""
    data_flag = "" if args.keep_inputs else f" --data {data.root}"
    agreed = "" if agreement is None else f"; labels agree with the model's top class for {agreement:.0%} of them"
    print(
        f"explained {len(res)} image(s) of {len(data.classes)} class(es) into {args.out}: {len(res)} explanation(s) "
        f"kept in {shards} shard(s){kept}{'' if res.complete else ' (incomplete)'}{agreed}; read them with "
        f"torchlime.dataset.load_results({str(args.out)!r}), draw one with: torchlime show {args.out} --index 0"
        f"{data_flag}"
    )
    return 0
