"""``AmortizedExplainer``: a small network trained once on LIME labels, then explaining in one forward.

``fit`` makes the labels with the batched engine at a small N (or reads them from a finished
``explain_dataset`` folder), holds out a seeded fraction, trains the modality's head on the rest,
fits the out-of-distribution distances and measures the head against LIME at a large N on the held-out
inputs (``report``). ``explain`` returns an ordinary ``Explanation`` from one forward of the head (and
of the model where the target is its top class).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable, Optional, Union

import torch
from torch import nn
from typing_extensions import Unpack

from torchlime._util.checks import check_positive_int, describe
from torchlime.amortized import _build, _files, _output, _train
from torchlime.amortized._labels import Labels, batches, engine_labels, from_folder, jittered
from torchlime.amortized._options import JITTER, TABLE_COPIES, FitOptions, Training
from torchlime.amortized._quality import measure
from torchlime.amortized._state import Trained
from torchlime.amortized.heads import MLPHead
from torchlime.engine.config import Call
from torchlime.engine.explainer import Explainer, ModalitySpec
from torchlime.engine.explanation import Explanation
from torchlime.typing import Model, Seed, TargetSpec

#: N of the labels by default: where the head's rank correlation with LIME at N=4096 flattens (``docs/amortized.md``,
#: measured by ``benchmarks/bench_amortized.py``: 0.77 / 0.92 / 0.93 at N = 16 / 64 / 256 on a digits CNN)
DEFAULT_SAMPLES = 64
#: N of the labels by default for table rows with the built-in head: a table's labels are cheap, and at 64 the
#: relative loss follows the noise of saturated rows (deletion AUC 1.07-1.11x LIME at N=4096's on the breast-cancer
#: MLP over 4 seeds, 1.03-1.07x at 128; ``docs/amortized.md``)
TABLE_SAMPLES = 128
#: N of ``explain(x, fallback=True)``
FALLBACK_SAMPLES = 1000


class AmortizedExplainer(Trained):
    """An explainer network trained on LIME labels: ``fit`` once, then ``explain`` in one forward.

    Make one with ``AmortizedExplainer.fit`` (or ``load``); its fields (``Trained``'s) are what it learnt
    and how: ``head``, ``model``, ``modality``, ``explainer`` (the label settings), ``features`` (the
    feature map shared by every input), ``input_shape``, ``labelled`` (the trained output columns),
    ``label_samples``, ``distances``, ``settings``, ``report`` and ``call``. Features are fixed across
    inputs: a grid or given segments, table columns, time-frequency cells of a fixed segmentation, token
    positions.
    """

    @classmethod
    def fit(
        cls,
        model: Model,
        inputs: object,
        *,
        modality: ModalitySpec = None,
        target: TargetSpec = None,
        explainer: Optional[Explainer] = None,
        n_samples: Optional[int] = None,
        generator: Seed = None,
        labels: object = None,
        **options: Unpack[FitOptions],
    ) -> AmortizedExplainer:
        """Label the inputs with the engine, train the head, and measure it on the held-out inputs.

        Args:
            model: the model to explain (any callable from a batch to (B, K) scores), on the inputs' device.
            inputs: (n, ...) inputs, or an iterable of batches (a DataLoader yielding tensors or
                (tensor, label) pairs); with ``labels``, the data set's inputs in its order (or None
                when the folder kept them).
            modality: the input kind (``Images(segments="grid")``, ``Spectrograms(...)``, ``Tabular(...)``,
                ``Tokens(...)``) or a feature map, as ``Explainer.explain`` takes it; features must be
                fixed across inputs.
            target: None (each input's top class), an int, "all", "topK" or per-input columns: the
                labelled columns.
            explainer: the label settings (any ``Explainer``: ``Explainer(preset="kernel_shap")``...);
                None: the engine's defaults.
            n_samples: N of the labels (noisy labels at a small N are the point: see ``docs/amortized.md``);
                None: ``TABLE_SAMPLES`` (128) for table rows with the built-in head, else ``DEFAULT_SAMPLES`` (64).
            generator: an int seed (or a ``torch.Generator``: its initial seed); None: 0. The masks, the
                split, the initial weights and the minibatches derive from it.
            labels: ``load_results(folder)`` of a finished ``explain_dataset`` run (or rows of it): train
                from its rows instead of making labels.
            **options: how to train (``FitOptions``: ``epochs``, ``head``, ``holdout``, ``batch_size``,
                ``lr``, ``report_samples``, ``progress``, ``copies``, ``loss``).

        Returns:
            The trained ``AmortizedExplainer``.

        Raises:
            TypeError / ValueError: bad arguments (named), feature maps that differ between inputs,
                waveforms (features on the STFT).

        Example:
            >>> import torchlime
            >>> net = torch.nn.Sequential(torch.nn.Linear(6, 3))
            >>> amort = AmortizedExplainer.fit(net, torch.rand(32, 6), modality=torch.arange(6).view(1, 6),
            ...                                n_samples=32, epochs=2, report_samples=64)
            >>> exp = amort.explain(torch.rand(4, 6))
            >>> exp.coef.shape, bool(exp.score.isnan().all())
            (torch.Size([4, 1, 6]), True)
        """
        explainer = Explainer() if explainer is None else explainer
        if not isinstance(explainer, Explainer):
            raise TypeError(
                f"`explainer` must be a torchlime.Explainer (the label settings), got {describe(explainer)}"
            )
        training = Training.of(options)
        seed = _seed(generator)
        if n_samples is not None:
            n_samples = check_positive_int(n_samples, "n_samples", minimum=2)

        _build.check_modality(modality)
        if labels is None:
            parts = list(batches(inputs))  # read once: the head's kind, and so the default N, follows the inputs
            n = _label_samples(n_samples, parts[0] if parts else None, modality, training)
            lab = engine_labels(model, parts, modality, explainer, target, n, seed, training.progress)
        else:
            default = DEFAULT_SAMPLES if n_samples is None else n_samples
            lab, n = from_folder(labels, inputs, lambda x: _build.n_outputs(model, x, None), default)
        relabel = None
        if labels is None:  # the engine labels the jittered copies alike, their masks from seed + 1

            def relabel(rows: torch.Tensor, tgt: TargetSpec) -> Labels:
                return engine_labels(model, rows, modality, explainer, tgt, n, seed + 1, False)

        return cls._train(model, modality, explainer, lab, n, seed, training, (target, relabel))

    @classmethod
    def _train(
        cls,
        model: Model,
        modality: ModalitySpec,
        explainer: Explainer,
        lab: Labels,
        n_samples: int,
        seed: int,
        training: Training,
        copying: tuple[TargetSpec, Optional[Callable[[torch.Tensor, TargetSpec], Labels]]] = (None, None),
    ) -> AmortizedExplainer:
        """Split, train, fit the distances, report (``fit`` after its labels).

        ``copying`` is the labels' target and how the engine labels other inputs (None for labels from a
        folder): with it, the training inputs' jittered copies join the training (``_with_copies``).
        """
        x = lab.inputs
        kind = _build.head_kind(modality, x) if training.head is None else "user"
        train_idx, held_idx = (i.to(x.device) for i in _train.split(x.shape[0], training.holdout, seed))
        xt, vt, mt = x[train_idx], lab.values[train_idx], lab.labelled[train_idx]
        if training.head is None:
            pos = _build.positions(kind, lab.features, lab.input_shape)
            rms = vt[mt].square().mean().sqrt() if bool(mt.any()) else torch.ones(())
            net = _build.build_head(kind, xt, pos, lab.values.shape[1], rms, seed)
        else:
            net = copy.deepcopy(training.head).to(x.device)
        copies = training.copies if training.copies is not None else TABLE_COPIES if kind == "mlp" else 0
        xa, va, ma = xt, vt, mt
        target, relabel = copying
        if copies and relabel is not None:
            xa, va, ma = _with_copies(lab, train_idx, copies, seed, target, relabel)
        # the table head's own loss, also where it is given (the probe's warm start passes the last one)
        loss = training.loss or ("relative" if isinstance(net, MLPHead) else "absolute")
        losses = _train.train(net, xa, va, ma, training, seed, relative=loss == "relative")
        with torch.no_grad():
            hidden_t = _train.outputs(net, xt)[1]
            hidden_h = _train.outputs(net, x[held_idx])[1]
        distances = _train.Distances.fit(hidden_t, hidden_h)
        first = lab.first
        settings: dict[str, Any] = {
            "labels": _output.label_settings(first),
            "seed": seed,
            "trained_inputs": int(train_idx.shape[0]),
            "held_out_inputs": int(held_idx.shape[0]),
            "loss": loss,
            "losses": losses,
            "jittered_copies": int(xa.shape[0] - xt.shape[0]),
            "head_kind": kind,
            "head_digest": _train.digest(net),
        }
        call = Call() if first is None or first.call is None else first.call
        amort = cls(
            net,
            model,
            modality,
            explainer,
            lab.features,
            lab.input_shape,
            lab.labelled.any(0),
            n_samples,
            distances,
            settings,
            None,
            call,
        )
        if training.report_samples is not None and held_idx.shape[0]:
            held = Labels(
                x[held_idx], lab.values[held_idx], lab.labelled[held_idx], first, lab.features, lab.input_shape
            )
            amort.report = measure(amort, held, training.report_samples, seed)
        return amort

    def explain(
        self,
        x: torch.Tensor,
        target: TargetSpec = None,
        *,
        fallback: bool = False,
        fallback_samples: int = FALLBACK_SAMPLES,
    ) -> Explanation:
        """Explain B inputs in one forward of the head (and of the model for their top class).

        Args:
            x: (B, *input_shape) inputs, on the head's device.
            target: None (each input's top class: one model forward), an int, or a long (B,) or (B, T)
                tensor of output columns, each one the head was trained on.
            fallback: explain the inputs flagged out of distribution with the engine instead (label settings,
                ``fallback_samples`` samples).
            fallback_samples: N of the fallback.

        Returns:
            An ``Explanation``: coef (B, T, F), intercept and local_pred (intercept + the coefficients'
            sum) (B, T), score NaN (no fit to judge), no samples; ``run`` an ``AmortizedRun`` whose
            ``quality`` flags the inputs out of distribution and whose ``amortized`` record names the head,
            the labels and each input's distance. ``refit`` is refused (there are no samples to refit).

        Raises:
            TypeError / ValueError: inputs of another shape, targets out of range or never trained on,
                a top class asked of an explainer loaded without its model.
        """
        return _output.explain(self, x, target, fallback, fallback_samples)

    def save(self, path: Union[str, Path]) -> None:
        """Write the head's state dict and settings with ``torch.save`` (loadable with ``weights_only=True``).

        Args:
            path: the file to write.
        """
        _files.save(self, Path(path))

    @classmethod
    def load(
        cls,
        path: Union[str, Path],
        head: Optional[nn.Module] = None,
        *,
        model: Optional[Model] = None,
        modality: ModalitySpec = None,
        explainer: Optional[Explainer] = None,
        map_location: Union[str, torch.device] = "cpu",
    ) -> AmortizedExplainer:
        """Read an explainer written by ``save`` (no arbitrary unpickling); outputs bit-identical.

        Args:
            path: the file ``save`` wrote.
            head: an instance of your own head's class (its weights are replaced by the file's); None: the
                built-in head the file names is rebuilt.
            model: the explained model (for top classes, the fallback); None: targets must be given.
            modality: the input kind (for each explanation's record); None: the stored feature map.
            explainer: the label settings for the fallback; None: the engine's defaults.
            map_location: where the tensors go.

        Returns:
            The explainer.

        Raises:
            ValueError: not such a file, or a user's head it cannot rebuild without ``head``.
        """
        return _files.load(cls, Path(path), head, model, modality, explainer, map_location)

    def refreshed(self, model: Model, inputs: object, **options: Any) -> AmortizedExplainer:
        """A new explainer fitted on ``inputs`` with this one's settings (the modality, the label settings, N).

        Args:
            model: the model (e.g. as training changed it).
            inputs: the inputs to label.
            **options: other keywords of ``fit`` (``epochs``, ``generator``, ...).

        Returns:
            The new explainer.
        """
        keywords: dict[str, Any] = dict(modality=self.modality, explainer=self.explainer, n_samples=self.label_samples)
        keywords.update(options)
        return type(self).fit(model, inputs, **keywords)

    def __repr__(self) -> str:
        k = int(self.labelled.shape[0])
        f = int(self.features.max()) + 1
        return (
            f"AmortizedExplainer({type(self.head).__name__} over {f} features and {k} output columns, labels at "
            f"N={self.label_samples}, {self.settings.get('trained_inputs', '?')} inputs trained)"
        )


def _with_copies(
    lab: Labels,
    train_idx: torch.Tensor,
    copies: int,
    seed: int,
    target: TargetSpec,
    relabel: Callable[[torch.Tensor, TargetSpec], Labels],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The training inputs and their labels, then ``copies`` jittered copies of them labelled by ``relabel``.

    A copy is labelled for the target given, or, where that was per input, its input's first labelled column.

    Returns:
        (n', *input_shape) inputs, (n', K, F + 1) labels, bool (n', K) labelled pairs.

    Raises:
        TypeError: token ids (no jitter for them).
    """
    x = lab.inputs[train_idx]
    if not x.dtype.is_floating_point:
        raise TypeError(f"`copies` must be 0 for {x.dtype} inputs (token ids are not jittered), got {copies}")
    rows, origin = jittered(x, copies, JITTER, seed)
    shared = target is None or isinstance(target, (int, str))
    tgt = target if shared else lab.labelled[train_idx].float().argmax(1, keepdim=True)[origin]
    more = relabel(rows, tgt)
    return (
        torch.cat([x, rows]),
        torch.cat([lab.values[train_idx], more.values]),
        torch.cat([lab.labelled[train_idx], more.labelled]),
    )


def _label_samples(
    n_samples: Optional[int], first: Optional[torch.Tensor], modality: ModalitySpec, training: Training
) -> int:
    """N of the labels: the given one, else ``TABLE_SAMPLES`` (table rows, built-in head), else ``DEFAULT_SAMPLES``."""
    if n_samples is not None:
        return n_samples
    table = training.head is None and first is not None and _build.head_kind(modality, first) == "mlp"
    return TABLE_SAMPLES if table else DEFAULT_SAMPLES


def _seed(generator: Seed) -> int:
    """The int seed of ``generator`` (None: 0; a torch.Generator: its initial seed)."""
    if generator is None:
        return 0
    if isinstance(generator, torch.Generator):
        return int(generator.initial_seed())
    if isinstance(generator, bool) or not isinstance(generator, int):
        raise TypeError(f"`generator` must be None, an int seed or a torch.Generator, got {describe(generator)}")
    return generator
