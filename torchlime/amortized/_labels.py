"""Labels for the head: LIME explanations of the training inputs from the batched engine, or from a folder.

``engine_labels`` explains every batch of the inputs with the label settings (each input's masks from
(seed, its index), so the labels do not depend on the batch size); ``folder_labels`` reads the rows of a
finished ``explain_dataset`` folder. Both give a ``Labels``: the inputs, their dense (n, K, F + 1)
targets (coefficients and intercept for every labelled output column) and which columns are labelled.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Optional

import torch

from torchlime._util.checks import describe
from torchlime.amortized._build import n_outputs
from torchlime.engine.explainer import Explainer, ModalitySpec
from torchlime.engine.explanation import Explanation
from torchlime.typing import Model, TargetSpec

#: the shape of the features' refusal
FIXED = "features fixed across inputs (a grid, given segments, table columns, time-frequency cells, token positions)"


@dataclass
class Labels:
    """What the head learns from.

    Attributes:
        inputs: (n, *input_shape) the labelled inputs.
        values: (n, K, F + 1) the coefficients and, last, the intercept of every labelled column (0 elsewhere).
        labelled: bool (n, K) the labelled (input, column) pairs.
        first: the explanation of the first batch (its features, info and run record), or None for a folder.
        features: long (1, *fshape) the feature map shared by every input (ids 0..F-1).
        input_shape: the shape of one input.
    """

    inputs: torch.Tensor
    values: torch.Tensor
    labelled: torch.Tensor
    first: Optional[Explanation]
    features: torch.Tensor
    input_shape: tuple[int, ...]


def batches(inputs: object, name: str = "inputs") -> Iterator[torch.Tensor]:
    """The batches of ``inputs``: a tensor (one batch) or an iterable of tensors or (tensor, label) pairs.

    Args:
        inputs: a (n, ...) tensor, or an iterable of batches (a DataLoader).
        name: the argument's name in the messages.

    Yields:
        (b, ...) tensors.

    Raises:
        TypeError: neither a tensor nor an iterable of them.
    """
    if isinstance(inputs, torch.Tensor):
        yield inputs
        return
    if not isinstance(inputs, Iterable):
        raise TypeError(f"`{name}` must be a tensor or an iterable of batches (a DataLoader), got {describe(inputs)}")
    for batch in inputs:
        x = batch[0] if isinstance(batch, (tuple, list)) and batch else batch
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"`{name}` must yield tensors or (tensor, label) pairs, got a batch of {describe(x)}")
        yield x


def check_fixed(features: torch.Tensor, reference: torch.Tensor, where: str) -> None:
    """Raise unless every input's feature map (B or 1, ...) equals the reference map (1, ...)."""
    if features.shape[1:] != reference.shape[1:] or not bool((features == reference).all()):
        raise ValueError(
            f"`modality` must give {FIXED}; {where} got feature maps that differ between inputs (e.g. SLIC "
            "superpixels: pass torchlime.Images(segments='grid') or a given segment map)"
        )


def dense(values: torch.Tensor, target: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Scatter per-target rows (n, T, F + 1) with their columns (n, T) into (n, K, F + 1) and a (n, K) mask."""
    n, _, width = values.shape
    valid = target >= 0
    cols = target.clamp_min(0)
    out = torch.zeros(n, k, width, dtype=torch.float32, device=values.device)
    out = out.scatter(1, cols.unsqueeze(-1).expand(-1, -1, width), values.float() * valid.unsqueeze(-1))
    mask = torch.zeros(n, k, dtype=torch.bool, device=values.device).scatter(1, cols, valid)
    return out, mask


def engine_labels(
    model: Model,
    inputs: object,
    modality: ModalitySpec,
    explainer: Explainer,
    target: TargetSpec,
    n_samples: int,
    seed: int,
    progress: bool,
) -> Labels:
    """Explain every batch of ``inputs`` with the engine: the labels.

    Args:
        model: the model.
        inputs: a tensor or an iterable of batches.
        modality: the input kind (its features fixed across inputs).
        explainer: the label settings.
        target: the targets (None: each input's top class).
        n_samples: N per input.
        seed: the masks' seed; input i's masks come from (seed, i).
        progress: show a bar over the inputs.

    Returns:
        The ``Labels``.

    Raises:
        ValueError: feature maps that differ between inputs, or no input.
    """
    from tqdm.auto import tqdm

    xs, rows, cols = [], [], []
    first: Optional[Explanation] = None
    start = 0
    with tqdm(desc="torchlime labels", unit="input", disable=not progress, leave=False) as bar:
        for x in batches(inputs):
            index = torch.arange(start, start + x.shape[0], device=x.device)
            exp = explainer.explain(model, x, modality, target=target, n_samples=n_samples, generator=seed, index=index)
            if first is None:
                first = exp
            else:
                check_fixed(exp.features, first.features[:1], "`inputs`")
            xs.append(x)
            rows.append(torch.cat([exp.coef, exp.intercept.unsqueeze(-1)], dim=-1))
            cols.append(exp.target)
            start += x.shape[0]
            bar.update(x.shape[0])
    if first is None:
        raise ValueError("`inputs` must hold at least one input, got none")
    check_fixed(first.features, first.features[:1], "`inputs`")
    all_x = torch.cat(xs)
    values, labelled = dense(
        torch.cat(rows), torch.cat(cols), n_outputs(model, all_x[:1], first.call.output if first.call else None)
    )
    return Labels(all_x, values, labelled, first, first.features[:1], tuple(first.input_shape))


def folder_labels(results: object, inputs: Optional[torch.Tensor], k: int) -> Labels:
    """The labels of a finished ``explain_dataset`` folder (``load_results(out)``, or rows of it).

    Args:
        results: ``load_results(out)`` (a ``LazyResults``) or a slice of it (``Results``).
        inputs: (N, ...) the data set's inputs in its order (rows are matched by their ``index``), or
            None: the inputs the folder kept (``keep`` with "inputs").
        k: K, the model's output columns.

    Returns:
        The ``Labels`` (``first`` None).

    Raises:
        TypeError / ValueError: not results, no inputs kept nor given, no feature maps stored, maps that
            differ between inputs.
    """
    rows: Any = _rows(results)
    if not hasattr(rows, "coef") or not hasattr(rows, "index"):
        raise TypeError(f"`labels` must be load_results(folder) or rows of it, got {describe(results)}")
    x = getattr(rows, "inputs", None) if inputs is None else inputs[rows.index.to(inputs.device)]
    if not isinstance(x, torch.Tensor):
        raise ValueError(
            "`inputs` must be the data set's inputs when the folder kept none (explain_dataset's keep without "
            "'inputs'); got None"
        )
    features = getattr(rows, "features", None)
    if not isinstance(features, torch.Tensor):
        raise ValueError(
            "`labels` must hold feature maps (explain_dataset's keep with 'features'); the folder has none"
        )
    check_fixed(features, features[:1], "`labels`")
    values = torch.cat([rows.coef, rows.intercept.unsqueeze(-1)], dim=-1).to(x.device)
    dense_values, labelled = dense(values, rows.target.to(x.device), k)
    shape = rows.input_shape if rows.input_shape is not None else tuple(x.shape[1:])
    return Labels(x, dense_values, labelled, None, features[:1].to(x.device), tuple(shape))


def from_folder(
    labels: object, inputs: object, k_of: Callable[[torch.Tensor], int], default: int
) -> tuple[Labels, int]:
    """The labels of a folder (``folder_labels``) and their N (the largest ``samples_used``, else ``default``).

    Args:
        labels: ``load_results(folder)`` or rows of it.
        inputs: the data set's inputs (a tensor or batches), or None: those the folder kept.
        k_of: K from one input.
        default: N when the folder does not say.

    Returns:
        The labels and N.
    """
    rows: Any = _rows(labels)
    given = None if inputs is None else torch.cat(list(batches(inputs)))
    x0 = given if given is not None else getattr(rows, "inputs", None)
    if not isinstance(x0, torch.Tensor):
        raise ValueError(
            "`inputs` must be the data set's inputs when the folder kept none (explain_dataset's keep without "
            "'inputs'); got None"
        )
    used = getattr(rows, "samples_used", None)
    n = int(used.max()) if isinstance(used, torch.Tensor) and used.numel() else default
    return folder_labels(rows, given, k_of(x0[:1])), n


def _rows(results: object) -> object:
    """The rows of a folder in memory: a ``LazyResults`` read whole, ``Results`` as they are."""
    from torchlime.dataset import LazyResults

    return results[:] if isinstance(results, LazyResults) else results


def jittered(x: torch.Tensor, copies: int, spread: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``copies`` Gaussian copies of every input, each value moved by ``spread`` times its column's deviation.

    Args:
        x: (n, ...) float inputs.
        copies: the copies of each input.
        spread: the noise's standard deviation, in the inputs' standard deviations over n (per position).
        seed: the noise's seed (a CPU generator: the same copies on every device).

    Returns:
        (copies * n, ...) the copies, copy j of input i at j * n + i; long (copies * n,) their inputs' indices.
    """
    sd = x.std(0) if x.shape[0] > 1 else torch.zeros_like(x[0])
    noise = torch.randn((copies, *x.shape), generator=torch.Generator().manual_seed(seed)).to(x.device, x.dtype)
    rows = (x.unsqueeze(0) + noise * (spread * sd)).reshape(copies * x.shape[0], *x.shape[1:])
    return rows, torch.arange(x.shape[0], device=x.device).repeat(copies)
