"""``torchlime show DIR [--index I ...] [--data FOLDER] [--out PATH]``: draw stored explanations as PNG pictures.

DIR is a result folder of ``torchlime explain-dataset`` (or of ``torchlime.dataset.explain_dataset`` over
images); I is the global index of an input (its position in the data set: with ``dataset.json``, the
I-th file in the order the run read them). Each picture is ``plot_image_explanation``'s four panels
(the image, its segments, the heat map over it, the top segments), drawn from the shards' coefficients
and segment maps and the image itself, which comes from:

* ``--data FOLDER``: the image folder the run read (ImageFolder layout, read again in the same order,
  with the channels and size ``dataset.json`` records, or ``--channels`` / ``--size``); it is checked
  against the run (the number of images and the fingerprint of the first);
* else the images the run kept (``explain-dataset --keep-inputs``);
* else none: the picture is the heat map alone, over the segment borders, and a note names ``--data``.

``--out`` is the PNG file when one input is drawn, else a folder that receives ``I.png`` per input
(default: ``DIR/pictures``). A folder without segment maps (written by an earlier torchlime, or with
a ``keep=`` without "features"), an index that is not stored or a FOLDER that is not the run's data is one line
on stderr and exit code 2. DIR is read as untrusted input (``torchlime.dataset.load_results``); a
``DIR/pictures`` that is a link, or a link among the pictures' names, is refused, never written through.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Optional

import torch

from torchlime.cli._args import Parser, int_at_least
from torchlime.cli._common import CliError, check_outside, collected_warnings, read_record
from torchlime.cli._output import Output, output_folder
from torchlime.cli._write import has_matplotlib

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from torchlime.dataset import LazyResults
    from torchlime.engine.explanation import Explanation

NO_IMAGES = (
    "no images to draw on: drew the heat map(s) alone; pass --data FOLDER (the image folder the run read) "
    "for the four panels, or run explain-dataset with --keep-inputs"
)


def add_parser(sub: argparse._SubParsersAction[Parser]) -> None:
    """The ``show`` command's options."""
    p = sub.add_parser("show", help="draw explanations stored by explain-dataset as PNG pictures")
    p.add_argument("folder", metavar="DIR", type=Path, help="a result folder of explain-dataset")
    p.add_argument(
        "--index",
        type=int_at_least(0),
        nargs="+",
        action="extend",
        metavar="I",
        help="global index of the input(s) to draw: the I-th image the run read (default: the first stored)",
    )
    p.add_argument(
        "--data",
        type=Path,
        metavar="FOLDER",
        help="the image folder the run read (same layout and order); default: the images the run kept, else none",
    )
    p.add_argument("--out", type=Path, help="the PNG file (one input) or a folder of I.png (default: DIR/pictures)")
    p.add_argument("--target-index", type=int_at_least(0), default=0, help="which explained target (default: 0)")
    p.add_argument("--top-k", type=int_at_least(1), default=5, help="top segments shown (default: %(default)s)")
    p.add_argument("--channels", type=int, choices=[1, 3], help="how FOLDER is read (default: as the run read it)")
    p.add_argument("--size", type=int_at_least(1), nargs=2, metavar=("H", "W"), help="resize FOLDER's images")
    p.add_argument("--no-verify", action="store_true", help="trust the shards: skip their SHA-256 check")
    p.set_defaults(parser=p)


def _positions(res: LazyResults, wanted: list[int], folder: Path) -> list[int]:
    """The positions in ``res`` of the global indices ``wanted``; an index that is not stored is a CliError."""
    index = res.index
    stored = ", ".join(f"{e['start']}..{e['stop'] - 1}" for e in res.entries) or "none"
    out = []
    for i in wanted:
        pos = int(torch.searchsorted(index, i)) if len(index) else 0
        if pos >= len(index) or int(index[pos]) != i:
            raise CliError(
                f"--index must be the index of a stored explanation: {folder} holds {len(index)} (inputs {stored}), "
                f"got {i}"
            )
        out.append(pos)
    return out


def _images(
    args: argparse.Namespace, res: LazyResults, record: dict[str, object], wanted: list[int]
) -> list[torch.Tensor]:
    """(C, H, W) images of the global indices ``wanted`` from --data, checked against the run."""
    from torchlime.cli.explain_dataset import ImageFolderFiles
    from torchlime.dataset._describe import input_fingerprint

    channels = args.channels or int(str(record.get("channels", 3)))
    recorded = args.size or record.get("size")
    size = (int(recorded[0]), int(recorded[1])) if isinstance(recorded, list) and len(recorded) == 2 else None
    data = ImageFolderFiles(args.data, channels, size)
    n = res.n_inputs
    if n is not None and len(data) != n:
        raise CliError(f"--data {args.data} must hold the {n} images the run read, got {len(data)}")
    first = res.info.get("first_input")
    if first is not None and input_fingerprint(data[0][0]) != first:
        raise CliError(
            f"--data {args.data} must be the image folder the run read: its first image {data.files[0][0]} differs "
            f"from the run's (another folder or order, or other --channels / --size)"
        )
    return [data[i][0] for i in wanted]


def _heatmap_alone(exp: Explanation, target_index: int, title: str) -> Figure:
    """The heat map of input 0 of ``exp`` over its segment borders (no image), in the pictures' colours."""
    import matplotlib.pyplot as plt
    import numpy as np

    from torchlime._util import colours as _colours
    from torchlime.image.segments import boundaries

    heat_t = exp.heatmap(target_index)[0, 0].detach().float().cpu()
    zoom = max(1, 256 // max(heat_t.shape[-2:]))  # small images drawn larger, so borders are thin lines

    def up(t: torch.Tensor) -> torch.Tensor:
        return t.repeat_interleave(zoom, -2).repeat_interleave(zoom, -1)

    heat = up(heat_t).numpy()
    edges = boundaries(up(exp.features[:1, 0].cpu()))[0].numpy()
    lim = max(float(np.abs(heat).max()), 1e-12)
    fig, ax = plt.subplots(figsize=(4.8, 4.0))
    im = ax.imshow(heat, cmap=_colours.CMAP, vmin=-lim, vmax=lim, interpolation="nearest")
    borders = np.zeros((*edges.shape, 4))
    borders[edges] = (0.0, 0.0, 0.0, 0.6)
    ax.imshow(borders, interpolation="nearest")
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04).set_label(_colours.label("weight"), fontsize=7)
    ax.set_title(title, fontsize=9)
    ax.axis("off")
    fig.tight_layout()
    return fig


def _paths(args: argparse.Namespace, wanted: list[int]) -> tuple[Optional[Path], list[Path]]:
    """(the folder to create, or None for one file; the PNG path of every input)."""
    out = args.out if args.out is not None else args.folder / "pictures"
    if len(wanted) == 1 and out.suffix.lower() == ".png":
        return None, [out]
    if out.suffix.lower() == ".png":
        raise CliError(f"--out must be a folder when several inputs are drawn ({len(wanted)}), got the file {out}")
    return out, [out / f"{i}.png" for i in wanted]


def run(args: argparse.Namespace) -> int:  # noqa: C901
    """The ``show`` command (see the module docstring)."""
    from torchlime.dataset import load_results
    from torchlime.image.viz import plot_image_explanation

    if not has_matplotlib():
        raise CliError("torchlime show draws with matplotlib: pip install torchlime[viz]")
    if not args.folder.is_dir():
        raise CliError(
            f"DIR {args.folder}: no such folder" if not args.folder.exists() else f"DIR {args.folder}: not a folder"
        )
    notes: list[str] = []
    with collected_warnings(notes):
        res = load_results(args.folder, verify=not args.no_verify)
    if len(res) == 0:
        raise CliError(f"DIR {args.folder} holds no finished explanation yet")
    wanted = list(dict.fromkeys(args.index or [int(res.index[0])]))
    positions = _positions(res, wanted, args.folder)
    rows = [res[p] for p in positions]
    if rows[0].features is None or any(r.features is None for r in rows):
        raise CliError(
            f"DIR {args.folder} holds no segment maps (written by an earlier torchlime, or with a keep= without "
            f"'features'): its explanations cannot be drawn; run explain-dataset again into a new folder"
        )
    if any(r.features is not None and r.features.ndim != 4 for r in rows):
        shape = tuple(rows[0].features.shape[1:])
        raise CliError(f"torchlime show draws image explanations (maps (1, H, W) per input); DIR holds maps {shape}")
    n_targets = rows[0].coef.shape[1]
    if args.target_index >= n_targets:
        raise CliError(
            f"--target-index must be below the {n_targets} target(s) explained per input, got {args.target_index}"
        )
    record = read_record(args.folder)
    classes = record.get("classes")
    names = [str(c) for c in classes] if isinstance(classes, list) else None
    files = record.get("files")
    if args.data is not None:
        images: Optional[list[torch.Tensor]] = _images(args, res, record, wanted)
    elif all(r.inputs is not None for r in rows):
        images = [r.inputs[0] for r in rows if r.inputs is not None]
    else:
        images = None
    folder, paths = _paths(args, wanted)
    if args.data is not None:
        check_outside(paths[0].parent, Path(args.data), "--out", "--data")
    written = []
    inside = args.folder if args.out is None else None  # DIR/pictures: an entry of DIR, never a link
    with collected_warnings(notes), _destination(folder, paths[0], inside) as output:
        for k, (i, row, path) in enumerate(zip(wanted, rows, paths)):
            exp = row.explanation()
            t = args.target_index
            if images is None:
                target = int(exp.target[0, t])
                name = names[target] if names and 0 <= target < len(names) else str(target)
                title = f"input {i}: weight for '{name}' (R² {float(exp.score[0, t]):.2f}), no image"
                output.figure(path.name, _heatmap_alone(exp, t, title))
            else:
                image = images[k]
                if tuple(image.shape) != tuple(exp.input_shape):
                    raise CliError(f"input {i} has shape {tuple(image.shape)}, the run explained {exp.input_shape}")
                fig = plot_image_explanation(
                    exp, image[None].float(), index=0, target_index=t, k=args.top_k, class_names=names
                )
                output.figure(path.name, fig)
            source = f" ({files[i]})" if isinstance(files, list) and i < len(files) else ""
            written.append(f"{path}{source}")
    for note in notes:
        print(f"torchlime show: warning: {note}", file=sys.stderr)
    if images is None:
        print(f"torchlime show: note: {NO_IMAGES}", file=sys.stderr)
    print(f"wrote {len(written)} picture(s): {', '.join(written)}")
    return 0


@contextlib.contextmanager
def _destination(folder: Optional[Path], file: Path, inside: Optional[Path]) -> Iterator[Output]:
    """``output_folder(folder, inside)`` (removed again on failure when created here), or the folder of one PNG."""
    if folder is not None:
        with output_folder(folder, inside) as out:
            yield out
        return
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise CliError(f"cannot create the folder of --out {file}: {err.strerror or err}") from None
    with output_folder(file.parent) as out:
        yield out
