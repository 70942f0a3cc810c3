"""``torchlime summarize DIR [--k 10] [--out PATH] [--names FILE] [--pick N]``: global feature importance of a folder.

DIR is a result folder of ``torchlime explain-dataset`` (or of ``torchlime.dataset.explain_dataset``) whose
features are the same in every row: a fixed grid (``--segments grid``), time-frequency bands, tabular
columns. The command prints, per class (the explained target of each row), the top k features by mean
|weight| with the mean signed weight and a bootstrap 95% interval (``torchlime.dataset.summarize``), and
writes into ``--out`` (default: ``DIR/summary``) ``summary.json`` (every statistic) and, with matplotlib,
``bars.png`` (mean |weight| per feature) and ``beeswarm.png`` (one dot per explanation). ``--names FILE``
names the features (one name a line, or a JSON list); ``--pick N`` also runs SP-LIME over the folder
(``torchlime.dataset.pick``) and prints the N picked inputs. Class names come from ``DIR/dataset.json``
when explain-dataset wrote one. A missing folder, superpixels (features that differ between rows) or a
names file of the wrong length is one line on stderr and exit code 2. DIR is read as untrusted input
(``torchlime.dataset.load_results``); a ``DIR/summary`` that is a link, or a link among its files, is
refused (one line, exit code 2), never written through.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from torchlime.cli._args import Parser, file_arg, int_at_least
from torchlime.cli._common import CliError, collected_warnings, read_record
from torchlime.cli._output import output_folder
from torchlime.cli._write import has_matplotlib

if TYPE_CHECKING:
    from torchlime.dataset import Summary


def add_parser(sub: argparse._SubParsersAction[Parser]) -> None:
    """The ``summarize`` command's options."""
    p = sub.add_parser(
        "summarize", help="importance of every feature per class over a result folder: table, JSON, pictures"
    )
    p.add_argument("folder", metavar="DIR", type=Path, help="a result folder of explain-dataset (a fixed grid)")
    p.add_argument("--k", type=int_at_least(1), default=10, help="top features per class (default: %(default)s)")
    p.add_argument("--out", type=Path, help="the folder of summary.json, bars.png, beeswarm.png (default: DIR/summary)")
    file_arg(p, "--names", "feature names: one a line, or a JSON list")
    p.add_argument("--pick", type=int_at_least(1), metavar="N", help="also pick N inputs with SP-LIME")
    p.add_argument("--n-boot", type=int_at_least(1), default=200, help="bootstrap resamples (default: %(default)s)")
    p.add_argument("--seed", type=int_at_least(0), default=0, help="seed of the bootstrap (default: %(default)s)")
    p.add_argument("--pooled", action="store_true", help="one summary over every target instead of one per class")
    p.add_argument("--no-verify", action="store_true", help="trust the shards: skip their SHA-256 check")
    p.set_defaults(parser=p)


def _names(path: Optional[Path], n_features: int) -> Optional[list[str]]:
    """The feature names of ``--names FILE`` (checked against the folder's F), or None."""
    if path is None:
        return None
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise CliError(f"--names {path}: cannot read it: {getattr(err, 'strerror', None) or err}") from None
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except ValueError as err:
            raise CliError(f"--names {path}: not JSON: {err}") from None
        if not isinstance(data, list):
            raise CliError(f"--names {path} must hold a JSON list of names, got {type(data).__name__}")
        names = [str(x) for x in data]
    else:
        names = [line.strip() for line in text.splitlines() if line.strip()]
    if len(names) != n_features:
        raise CliError(f"--names {path} must hold one name per feature ({n_features}), got {len(names)}")
    return names


def _class_names(folder: Path) -> Optional[list[str]]:
    """The class names ``DIR/dataset.json`` records (explain-dataset over an image folder), or None."""
    try:
        classes = read_record(folder).get("classes")
    except CliError:
        return None
    return [str(c) for c in classes] if isinstance(classes, list) else None


def format_table(summary: Summary, k: int, class_names: Optional[list[str]] = None) -> str:
    """The top ``k`` features of each class as aligned text (what the command prints)."""
    lines = []
    width = max(7, *(len(n) for n in summary.names))
    rows = summary.table(k)
    for i, (c, n) in enumerate(zip(summary.classes.tolist(), summary.count.tolist())):
        name = f" ({class_names[c]})" if class_names and 0 <= c < len(class_names) else ""
        lines.append(("every target" if c < 0 else f"class {c}{name}") + f": {n} explanation(s)")
        lines.append(f"  rank  {'feature':<{width}}  mean|w|    mean w     95% interval of mean|w|")
        for row in rows[i * min(k, len(summary.names)) : (i + 1) * min(k, len(summary.names))]:
            low, high = (f"{v:.4g}" if isinstance(v, float) else "n/a" for v in (row["low"], row["high"]))
            lines.append(
                f"  {row['rank']:>4}  {row['name']!s:<{width}}  {row['mean_abs']:<9.4g}  {row['mean']:<+9.4g}  "
                f"[{low}, {high}]"
            )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """The ``summarize`` command (see the module docstring)."""
    from torchlime.dataset import load_results, pick, summarize

    folder = args.folder
    if not folder.is_dir():
        raise CliError(f"DIR {folder}: no such folder" if not folder.exists() else f"DIR {folder}: not a folder")
    notes: list[str] = []
    with collected_warnings(notes):
        res = load_results(folder, verify=not args.no_verify)
    if len(res) == 0:
        raise CliError(f"DIR {folder} holds no finished explanation yet")
    names = _names(args.names, res.n_features_max)
    if args.pick is not None and args.pick > len(res):
        raise CliError(f"--pick must be at most the {len(res)} explanations DIR holds, got {args.pick}")
    try:
        with collected_warnings(notes):
            summary = summarize(res, names=names, by_class=not args.pooled, n_boot=args.n_boot, generator=args.seed)
            picked = pick(res, args.pick).tolist() if args.pick is not None else None
    except ValueError as err:
        raise CliError(f"cannot summarize DIR {folder}: {err}") from None
    notes.extend(n for n in summary.notes if not any(n in seen for seen in notes))
    classes = _class_names(folder)
    out = args.out if args.out is not None else folder / "summary"
    written = []
    with output_folder(out, inside=folder if args.out is None else None) as output:  # DIR/summary: never a link
        record = summary.to_dict()
        record.update({"class_names": classes, "picked": picked})
        written.append(output.json("summary.json", record))
        if has_matplotlib():
            for name, draw in (("bars.png", summary.plot_bars), ("beeswarm.png", summary.plot_beeswarm)):
                fig = draw(min(args.k, summary.dot_features.shape[1]), class_names=classes)
                written.append(output.figure(name, fig))
        else:
            notes.append("matplotlib is not installed: no pictures (pip install torchlime[viz])")
    print(format_table(summary, args.k, classes))
    if picked is not None:
        print(f"SP-LIME picked {len(picked)} input(s): {', '.join(str(i) for i in picked)}")
    for note in notes:
        print(f"torchlime summarize: note: {note}", file=sys.stderr)
    print(f"wrote {', '.join(str(p) for p in written)}")
    return 0
