"""The model-parameter randomisation sanity check (Adebayo et al., "Sanity Checks for Saliency Maps", 2018).

An attribution method that explains the model must give other attributions when the model's
weights are replaced by random ones. ``randomisation_check(model, inputs, explain_fn)`` explains
the inputs with the trained model, then with copies of it whose layers are re-initialised, and
compares each input's two attributions:

* ``layers="cascading"``: the layers are re-initialised one more at a time, from the output layer
  down to the input (``from_output=False``: from the input up), each row of the result with every
  layer so far random;
* ``layers="independent"``: each layer alone, the others trained.

The layers are the modules with a ``reset_parameters`` method (``Linear``, ``Conv*``, norms,
``Embedding``...) in ``model.named_modules()`` order; a layer is re-initialised by its own
``reset_parameters()`` after ``torch.manual_seed(seed + 1)``, inside ``torch.random.fork_rng``, on a
``copy.deepcopy`` of the model: the caller's model and random state are untouched.

Similarities, per input, of the flattened attributions a (trained) and r (randomised):

* ``"spearman"``: the Pearson correlation of their ranks (ties averaged);
* ``"pearson"``: their Pearson correlation;
* ``"ssim"``: the structural similarity (Wang et al. 2004) of the maps: over the last two dims of
  attributions with two or more dims per input (averaged over the leading ones, e.g. channels), else
  of the flattened vectors; a uniform window of 7 (or the largest odd size that fits), K1 = 0.01,
  K2 = 0.03, sample covariances, data range = max - min of both maps (scikit-image's
  ``structural_similarity`` with that ``data_range``);
* a callable ``f(a (B, ...), r (B, ...)) -> (B,)``.

A method passes the check when the similarity drops as the layers go random; one that ignores the
model (an edge detector, the input itself) stays at 1.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional, Union, cast

import torch

from torchlime._util.checks import check_choice, describe, require
from torchlime.engine.explanation import Explanation
from torchlime.metrics._common import average_ranks, check_bool

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

Similarity = Union[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]
SIMILARITIES = ("spearman", "pearson", "ssim")
_WINDOW, _K1, _K2 = 7, 0.01, 0.03


@dataclass(frozen=True)
class RandomisationResult:
    """Per layer similarities of the trained model's attributions and the randomised model's.

    Attributes:
        layers: names of the re-initialised layers (``model.named_modules()``), in the order of the rows.
        similarity: float64 (L, B): row l, input b: the similarity of input b's attributions under the
            trained model and under the model with ``layers[:l + 1]`` (cascading) or ``layers[l]``
            (independent) re-initialised.
        mode: "cascading" or "independent".
        measure: the similarity's name ("spearman", "pearson", "ssim" or the callable's name).
    """

    layers: list[str]
    similarity: torch.Tensor
    mode: str
    measure: str

    def mean(self) -> torch.Tensor:
        """Float64 (L,): the mean similarity over the inputs of each row (NaN inputs left out)."""
        return self.similarity.nanmean(1)

    def table(self) -> str:
        """A plain-text table: one row per layer with the mean, min and max similarity over the inputs."""
        head = f"{'layer':<24} {self.measure + ' mean':>14} {'min':>8} {'max':>8}"
        rows = [head, "-" * len(head)]
        mean = self.mean().tolist()
        sim = self.similarity.nan_to_num(torch.nan)
        for name, m, low, high in zip(self.layers, mean, sim.amin(1).tolist(), sim.amax(1).tolist()):
            rows.append(f"{name[-24:]:<24} {m:>14.3f} {low:>8.3f} {high:>8.3f}")
        return "\n".join(rows)

    def __str__(self) -> str:
        return f"randomisation check ({self.mode}, {self.measure}):\n{self.table()}"

    def plot(self, ax: Optional[Axes] = None, title: Optional[str] = None) -> Figure:
        """Similarity against the randomised layers: each input faint, the mean bold.

        Args:
            ax: matplotlib axes to draw on (default: a new figure).
            title: the axes' title (default: the check's mode and similarity).

        Returns:
            The matplotlib ``Figure`` (the one of ``ax`` when it is given).

        Raises:
            ImportError: without matplotlib (names the ``viz`` extra).
        """
        plt = require("matplotlib.pyplot", "viz", "RandomisationResult.plot")
        if ax is None:
            _, ax = plt.subplots(figsize=(max(4.0, 0.5 * len(self.layers) + 2), 3.5))
        steps = list(range(len(self.layers)))
        sim = self.similarity.detach().cpu()
        for row in sim.T.tolist():
            ax.plot(steps, row, color="0.75", linewidth=0.8)
        ax.plot(steps, self.mean().cpu().tolist(), color="C3", marker="o", linewidth=2, label="mean over inputs")
        ax.axhline(0.0, color="0.5", linewidth=0.5)
        ax.set_xticks(steps)
        ax.set_xticklabels(self.layers, rotation=45, ha="right", fontsize="small")
        ax.set_xlabel("re-initialised layer" + (" (cumulative)" if self.mode == "cascading" else ""))
        ax.set_ylabel(f"similarity ({self.measure})")
        ax.set_title(title if title is not None else f"model randomisation, {self.mode}")
        ax.legend(fontsize="small")
        return cast("Figure", ax.figure)


def randomisation_check(
    model: torch.nn.Module,
    inputs: torch.Tensor,
    explain_fn: Callable[[torch.nn.Module, torch.Tensor], object],
    *,
    attributions: Optional[torch.Tensor] = None,
    layers: str = "cascading",
    similarity: Similarity = "spearman",
    from_output: bool = True,
    seed: int = 42,
) -> RandomisationResult:
    """Model-parameter randomisation test: per layer, how similar the attributions stay (module docstring).

    Args:
        model: the trained ``nn.Module`` (deep-copied; never modified).
        inputs: (B, ...) the inputs to explain.
        explain_fn: ``explain_fn(model, inputs) ->`` attributions (B, ...) (captum's, a Grad-CAM map) or
            an ``Explanation`` (its coefficients (B, T, F) are compared); called once with ``model``,
            then once per row with a randomised copy.
        attributions: (B, ...) the trained model's attributions, already made (None: ``explain_fn(model,
            inputs)``); each row compares the randomised copy's with them.
        layers: "cascading" (re-initialise layers cumulatively) or "independent" (one at a time).
        similarity: "spearman", "pearson", "ssim" or ``f(a, r) -> (B,)`` for attributions a, r (B, ...).
        from_output: randomise from the output layer down (True, Adebayo et al.'s cascading order) or
            from the input up; the order of the result's rows.
        seed: each layer is re-initialised after ``torch.manual_seed(seed + 1)``.

    Returns:
        A ``RandomisationResult``: ``layers``, ``similarity`` (L, B), ``table()``, ``plot()``.

    Raises:
        TypeError / ValueError: a model that is not an ``nn.Module`` or has no layer to re-initialise,
            an ``explain_fn`` that is not callable or returns other shapes for the randomised models,
            an unknown ``layers`` or ``similarity``.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
        >>> def saliency(m, x):  # the gradient of class 0
        ...     x = x.clone().requires_grad_()
        ...     return torch.autograd.grad(m(x)[:, 0].sum(), x)[0]
        >>> result = randomisation_check(net, torch.rand(4, 6), saliency)
        >>> result.layers, result.similarity.shape
        (['2', '0'], torch.Size([2, 4]))
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"`model` must be an nn.Module (its layers are re-initialised), got {describe(model)}")
    if not isinstance(inputs, torch.Tensor) or inputs.ndim < 1:
        raise TypeError(f"`inputs` must be a batched tensor (B, ...), got {describe(inputs)}")
    if not callable(explain_fn) or isinstance(explain_fn, torch.Tensor):
        raise TypeError(
            "`explain_fn` must be a callable explain_fn(model, inputs) -> attributions (the check explains the "
            f"inputs again with randomised models), got {describe(explain_fn)}"
        )
    mode = check_choice(layers, "layers", ("cascading", "independent"))
    check_bool(from_output, "from_output")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"`seed` must be an int, got {describe(seed)}")
    compare, measure = similarity_fn(similarity)
    names = [name for name, m in model.named_modules() if callable(getattr(m, "reset_parameters", None))]
    if not names:
        raise ValueError("`model` has no layer with a reset_parameters() method to re-initialise")
    order = names[::-1] if from_output else names
    made = explain_fn(model, inputs) if attributions is None else attributions
    reference = attribution_of(made, inputs.shape[0], None)
    variant = copy.deepcopy(model)
    trained = copy.deepcopy(model.state_dict()) if mode == "independent" else {}
    rows = []
    for name in order:  # one explanation of all inputs per layer
        if mode == "independent":
            variant.load_state_dict(trained)
        reinitialise(variant.get_submodule(name), seed)
        rows.append(compare(reference, attribution_of(explain_fn(variant, inputs), inputs.shape[0], reference)))
    return RandomisationResult(order, torch.stack(rows).double(), mode, measure)


def reinitialise(module: torch.nn.Module, seed: int) -> None:
    """``module.reset_parameters()`` with torch's generators seeded ``seed + 1``, the caller's random state kept.

    The CPU generator and those of the CUDA devices the module's own tensors are on are seeded (the
    equivalent of ``torch.manual_seed(seed + 1)`` for the module) and restored afterwards.
    """
    tensors = [*module.parameters(recurse=False), *module.buffers(recurse=False)]
    cuda = sorted({t.device.index if t.device.index is not None else 0 for t in tensors if t.device.type == "cuda"})
    with torch.random.fork_rng(devices=cuda), torch.no_grad():
        torch.random.default_generator.manual_seed(seed + 1)
        for index in cuda:
            with torch.cuda.device(index):
                torch.cuda.manual_seed(seed + 1)
        cast(Callable[[], object], module.reset_parameters)()


def attribution_of(result: object, rows: int, reference: Optional[torch.Tensor]) -> torch.Tensor:
    """The attributions (rows, ...) of an ``explain_fn`` result (an Explanation's coefficients), checked."""
    out = result.coef if isinstance(result, Explanation) else result
    if not isinstance(out, torch.Tensor) or out.ndim < 1 or out.shape[0] != rows:
        raise ValueError(f"`explain_fn` must return {rows} attributions (B, ...), got {describe(result)}")
    if reference is not None and out.shape != reference.shape:
        raise ValueError(
            f"`explain_fn` must return attributions of one shape {tuple(reference.shape)} for every model, "
            f"got {tuple(out.shape)}"
        )
    return out.detach().double()


def similarity_fn(similarity: object) -> tuple[Callable[[torch.Tensor, torch.Tensor], torch.Tensor], str]:
    """The batched similarity (a (B, ...), r (B, ...)) -> (B,) of a name or a callable, and its name."""
    if callable(similarity):
        fn = cast(Callable[[torch.Tensor, torch.Tensor], torch.Tensor], similarity)
        return (lambda a, r: torch.as_tensor(fn(a, r), dtype=torch.float64).reshape(a.shape[0])), getattr(
            similarity, "__name__", "custom"
        )
    name = check_choice(similarity, "similarity", SIMILARITIES)
    return {"spearman": spearman, "pearson": pearson, "ssim": ssim}[name], name


def pearson(a: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """Float64 (B,) Pearson correlation of the flattened a (B, ...) and r (B, ...); NaN where one is constant.

    Example:
        >>> round(float(pearson(torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([[2.0, 4.0, 7.0]]))), 4)
        0.9934
    """
    a = a.reshape(a.shape[0], -1).double()
    r = r.reshape(r.shape[0], -1).double()
    a = a - a.mean(1, keepdim=True)
    r = r - r.mean(1, keepdim=True)
    return (a * r).sum(1) / ((a * a).sum(1) * (r * r).sum(1)).sqrt()


def spearman(a: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """Float64 (B,) Spearman correlation: the Pearson correlation of the ranks (ties averaged).

    Example:
        >>> float(spearman(torch.tensor([[1.0, 5.0, 3.0]]), torch.tensor([[0.1, 0.9, 0.2]])))
        1.0
    """
    every = torch.ones((), dtype=torch.bool, device=a.device)
    return pearson(
        average_ranks(a.reshape(a.shape[0], -1), every)[0], average_ranks(r.reshape(r.shape[0], -1), every)[0]
    )


def ssim(a: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """Float64 (B,) mean structural similarity of the maps a, r (B, ...) (module docstring).

    Example:
        >>> x = torch.rand(2, 9, 9)
        >>> ssim(x, x).tolist()
        [1.0, 1.0]
    """
    b = a.shape[0]
    a, r = a.double(), r.double()
    both = torch.cat((a.reshape(b, -1), r.reshape(b, -1)), 1)
    span = (both.amax(1) - both.amin(1)).view(b, 1)
    planar = a.ndim >= 3
    shape = a.shape[-2:] if planar else (a[0].numel(),)
    a, r = a.reshape(-1, 1, *shape), r.reshape(-1, 1, *shape)
    win = min(_WINDOW, *shape)
    win -= 1 - win % 2  # the largest odd size that fits
    if win < 3:
        raise ValueError(f"ssim needs maps of at least 3 elements along each compared dim, got {tuple(shape)}")
    pool: Callable[..., torch.Tensor] = torch.nn.functional.avg_pool2d if planar else torch.nn.functional.avg_pool1d

    def mean(t: torch.Tensor) -> torch.Tensor:
        return pool(t, win, 1).reshape(b, -1)  # the windows that fit: scikit-image's cropped filter

    n = win * win if planar else win
    ua, ur = mean(a), mean(r)
    cov = n / (n - 1)
    va, vr = cov * (mean(a * a) - ua * ua), cov * (mean(r * r) - ur * ur)
    var = cov * (mean(a * r) - ua * ur)
    c1, c2 = (_K1 * span) ** 2, (_K2 * span) ** 2
    s = (2 * ua * ur + c1) * (2 * var + c2) / ((ua * ua + ur * ur + c1) * (va + vr + c2))
    return s.mean(1)
