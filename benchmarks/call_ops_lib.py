"""The operators of one call, counted on the CPU: the table of a call's fixed cost, for one source tree.

Run as a script with a tree's root (``python benchmarks/call_ops_lib.py ROOT``), it imports
``torchlime`` from ROOT (an older commit's ``git worktree`` too) and the counter from *this* file's
tree (``tests/helpers/ops.py``, loaded by path), counts every row and prints one JSON object: per row
the fixed operators, the operators per chunk, the ``record_function`` ranges and, split the same
way, the operators by name, profiler range, function, (range, function) pair, source line and site
(operator at a line).
``bench_call_profile.py --ops`` runs it for this tree and a baseline and writes the table.

The last row, beyond the table, is the default SLIC call counted on the CUDA path's branch
(``cuda_path=True``: on the CPU, SLIC runs its own torch iterations instead of its kernel doors).

The models cost next to nothing and their own operators are not counted (counting pauses inside
them): what is counted is torchlime's work around them. Images are 64x64; each row runs at N and 4N
samples at a fixed chunk size (``batch_size=CHUNK`` rows per model call) after an uncounted warm-up
call of the same arguments.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import sys
import warnings
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parents[1]
SIZE, N, CHUNK, PROBE_N = 64, 160, 32, 500  # N and 4N: both the default Sobol design for 64 features


def load_counter() -> Any:
    """``tests/helpers/ops.py`` of this file's tree, loaded by path (the tree measured may have none)."""
    spec = importlib.util.spec_from_file_location("_ops_counter", HERE / "tests" / "helpers" / "ops.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve the module's annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def rows() -> dict[str, dict[str, Any]]:
    """Each row: ``run(model, n)``, its model, the model rows per sample and whether to split by N."""
    import torch

    from torchlime import ProbeExplainer  # the top-level name in both trees
    from torchlime.image import explain_image
    from torchlime.targets import Boxes
    from torchlime.text import explain_generation, explain_tokens

    g = torch.Generator().manual_seed(0)
    images = torch.rand(8, 3, SIZE, SIZE, generator=g)
    r = torch.arange(SIZE) * 8 // SIZE
    labels = (r.view(-1, 1) * 8 + r.view(1, -1)).view(1, 1, SIZE, SIZE)  # 8x8 cells: 64 features

    class Classifier(torch.nn.Module):
        """(c, 3, H, W) -> (c, 10): channel means times a fixed matrix."""

        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(3, 10, generator=torch.Generator().manual_seed(1)))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.mean((2, 3)) @ self.w

    class TokenModel(torch.nn.Module):
        """(c, L) ids -> (c, 3): counts of three ids."""

        def forward(self, input_ids: torch.Tensor, attention_mask: Any = None) -> torch.Tensor:
            return torch.stack([(input_ids == k).float().sum(1) for k in (5, 9, 13)], 1)

    class Detector(torch.nn.Module):
        """A torchvision-style detector: a list of dicts (boxes, labels, scores) per image, two boxes."""

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("anchors", torch.tensor([[4.0, 4, 30, 30], [30, 30, 60, 60]]))

        def forward(self, x: torch.Tensor) -> list[dict[str, torch.Tensor]]:
            scores = torch.sigmoid(x.mean((1, 2, 3)).view(-1, 1) * torch.arange(1.0, 3.0))
            return [dict(boxes=self.anchors, labels=torch.tensor([1, 2]), scores=s) for s in scores]

    class CopyLM(torch.nn.Module):
        """Causal LM whose token q >= 12 copies the prompt token 2 (q - 12) + 1: (c, L) -> (c, L, 32) logits
        (greedy decoding from it continues a prompt with its odd tokens)."""

        def forward(self, input_ids: torch.Tensor, attention_mask: Any = None, **_: Any) -> torch.Tensor:
            length = input_ids.shape[1]
            q = torch.arange(1, length + 1)
            src = (2 * (q - 12) + 1).clamp(0, length - 1)
            return 8.0 * torch.nn.functional.one_hot(input_ids[:, src], 32).float()

    ids = torch.randint(2, 32, (1, 24), generator=g)
    prompt = torch.randint(2, 32, (1, 12), generator=g)
    quiet = dict(batch_size=CHUNK, generator=0)

    def image_given(m: Any, n: int) -> object:
        return explain_image(m, images[:1], segments=labels, target=0, n_samples=n, **quiet)

    def image_slic(m: Any, n: int) -> object:  # the default segments
        return explain_image(m, images[:1], n_samples=n, **quiet)

    def image_grid(m: Any, n: int) -> object:
        return explain_image(m, images[:1], segments="grid", n_samples=n, **quiet)

    def images_grid(m: Any, n: int) -> object:
        return explain_image(m, images, segments="grid", n_samples=n, **quiet)

    def tokens(m: Any, n: int) -> object:
        return explain_tokens(m, ids, mask_id=0, vocab_size=32, n_samples=n, **quiet)

    def detector_boxes(m: Any, n: int) -> object:  # the boxes: the detector's own on the unperturbed image
        return explain_image(m, images[:1], segments="grid", target=Boxes(), n_samples=n, **quiet)

    def generation(m: Any, n: int) -> object:  # the continuation: greedy, Continuation()'s 8 new tokens
        return explain_generation(m, prompt, mask_id=0, n_samples=n, **quiet)

    probe_model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
    probes: dict[int, Any] = {}

    def probe(m: Any, n: int) -> object:  # one ProbeExplainer, made once; the counted call is maybe_explain
        if id(m) not in probes:
            if "call" in inspect.signature(ProbeExplainer).parameters:  # 0.2: the call's settings as one record
                from torchlime import Call

                probes[id(m)] = ProbeExplainer(m, images[:1], labels, every=1, call=Call(n_samples=n, generator=0))
            else:  # the baseline tree's keywords
                probes[id(m)] = ProbeExplainer(m, images[:1], labels, every=1, n_samples=n, generator=0)
        return probes[id(m)].maybe_explain(len(probes))

    return {
        "explain_image, 1 image, given labels": dict(run=image_given, model=Classifier(), rows=1),
        "explain_image, 1 image, grid": dict(run=image_grid, model=Classifier(), rows=1),
        "explain_image, 8 images, grid": dict(run=images_grid, model=Classifier(), rows=8),
        "explain_tokens, 24 tokens": dict(run=tokens, model=TokenModel(), rows=1),
        "Boxes, 1 image x 2 boxes (list-of-dicts detector)": dict(run=detector_boxes, model=Detector(), rows=1),
        "explain_generation, 12 tokens": dict(run=generation, model=CopyLM(), rows=1),
        "ProbeExplainer, 1 image, whole call at N=500": dict(run=probe, model=probe_model, rows=None),
        # beyond the seven: the default SLIC, on the CUDA path's branch (its steps are kernel doors there)
        "explain_image, 1 image, SLIC (CUDA path)": dict(run=image_slic, model=Classifier(), rows=1, cuda_path=True),
    }


def measure(only: list[str] | None = None) -> dict[str, Any]:
    """Every row's split (or whole count, for the probe) as JSON-ready dicts."""
    import torch

    ops = load_counter()
    torch.manual_seed(0)
    out: dict[str, Any] = {}
    for name, row in rows().items():
        if only and not any(o in name for o in only):
            continue
        try:
            out[name] = measure_row(ops, row)
        except Exception as err:  # noqa: BLE001 - a row an older tree cannot run must not lose the others
            out[name] = dict(error=f"{type(err).__name__}: {err}")
    return out


def _top(counts: dict[str, float], k: int) -> dict[str, float]:
    """The ``k`` largest entries, largest first, whole counts as ints."""
    pairs = sorted(counts.items(), key=lambda kv: -kv[1])[:k]
    return {name: int(n) if float(n).is_integer() else n for name, n in pairs}


#: how many entries of each breakdown the JSON keeps
KEEP = dict(ops=15, stages=20, stage_functions=60, functions=25, lines=30, sites=40)


def measure_row(ops: Any, row: dict[str, Any]) -> dict[str, Any]:
    """One row's split (or whole count, for the probe) and where its operators come from."""
    run: Callable[[Any, int], object] = row["run"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the quality checks' warnings on near-free models
        if row["rows"] is None:  # a whole call at PROBE_N: everything in it is fixed
            c = ops.count_call(
                lambda m: run(m, PROBE_N), row["model"], where=True, cuda_path=row.get("cuda_path", False)
            )
            return dict(
                fixed=c.total,
                per_chunk=None,
                ranges=c.n_ranges,
                totals=[c.total],
                model_calls=[c.model_calls],
                uploads=[c.uploads],
                host_reads=[sum(c.host_reads.values())],
                range_names=dict(c.ranges),
                fixed_by={f: _top(getattr(c, f), k) for f, k in KEEP.items()},
            )
        s = ops.call_ops(
            run, row["model"], N, CHUNK, rows=row["rows"], where=True, cuda_path=row.get("cuda_path", False)
        )
    return dict(
        fixed=s.fixed,
        per_chunk=s.per_chunk,
        ranges=s.ranges,
        ranges_fixed=s.ranges_fixed,
        ranges_per_chunk=s.ranges_per_chunk,
        chunks=list(s.chunks),
        totals=list(s.totals),
        model_calls=list(s.model_calls),
        uploads=list(s.uploads),
        host_reads=list(s.host_reads),
        range_names=dict(s.range_names),
        fixed_by={f: _top(s.fixed_by[f], k) for f, k in KEEP.items()},
        per_chunk_by={f: _top(s.per_chunk_by[f], KEEP[f]) for f in ("ops", "stages", "stage_functions", "sites")},
    )


def main() -> None:
    root = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else HERE
    sys.path.insert(0, str(root))
    import torch

    import torchlime

    assert Path(torchlime.__file__).resolve().is_relative_to(root), (torchlime.__file__, root)
    torch.set_num_threads(1)
    print(json.dumps(dict(root=str(root), rows=measure(sys.argv[2:] or None))))


if __name__ == "__main__":
    main()
