"""``Explain``: attribution as one more Ray Data ``map_batches`` stage.

Batch inference on Ray reads a data set, maps its batches through actors that hold the model and writes
the results; explaining is one more such stage::

    import ray
    import torchlime
    from torchlime.integrations.ray_data import Explain

    ds = ray.data.read_parquet("images/")  # an "id" column (each input's global index) and an "image" column
    ds.map_batches(
        Explain,
        fn_constructor_args=(load_model,),  # load_model() returns the model: called once per actor
        fn_constructor_kwargs=dict(
            modality=torchlime.Images(),
            call=torchlime.Call(n_samples=1000, target="top3", generator=0),
            column="image",
            index_column="id",
        ),
        compute=ray.data.ActorPoolStrategy(size=4),
        num_gpus=1,
        batch_size=32,
    ).write_parquet("explanations/")

Each actor calls ``model_fn()`` once (with its first batch) and keeps the model, on the actor's GPU when Ray gave
it one. Each call explains the batch's inputs in one batched torchlime call (``Explainer.run`` with the
modality and the call) and returns the batch's other columns (the input column only with ``keep=("inputs",)``)
beside the explanation's, the fields of ``explain_dataset``'s shards:
``coef`` (b, T, F; zero past each row's ``n_features``, F being the batch's widest), ``intercept``, ``score``,
``local_pred`` (b, T), ``target`` (b, T), ``n_features`` (b,), ``samples_used`` (b,) when the explanation
records it, ``coef_std`` (or else ``coef_se``) and ``target_valid`` when it has them, and with
``keep=("features",)`` each input's feature map ``features`` (int64, as ``load_results`` reads them back).
Ray schedules, retries and writes.

Every input's masks and random fills derive from the seed and its global index, read from ``index_column``
and passed as the call's ``index`` as ``explain_dataset`` passes the data set's index, so the
coefficients are ``explain_dataset``'s bit for bit whatever the number of actors, the batch sizes, the order
of the rows or a retried batch (for a model whose outputs for a row do not depend on the other rows of its
call). Ray batches carry no global position: without such a column (``index_column=None``) every batch takes
0..b-1 and an input's masks depend on its place in its batch.

Ray is optional (``pip install 'torchlime[ray]'``) and imported only by ``explain_ray``, which writes the
``map_batches`` call; ``Explain`` needs no Ray: called on a dict of arrays it explains them in this process,
with the same numbers. (The module is named ``ray_data``: one named ``ray`` would be mistaken for the library.)
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Mapping
from typing import Any, Callable, Optional, Union

import numpy as np
import torch

from torchlime._util.checks import check_positive_int, describe, require
from torchlime.dataset._distributed import place
from torchlime.dataset._modality_run import ModalityRun, check_keep
from torchlime.dataset._rows import rows_of
from torchlime.engine.config import Call
from torchlime.engine.explainer import Explainer, ModalitySpec
from torchlime.typing import UNSET, Model

__all__ = ["Explain", "explain_ray"]

#: fields of ``rows_of`` that are not returned: the index and label columns pass through, the shape is metadata
_NOT_RETURNED = ("index", "label", "_input_shape")


def _check_columns(model_fn: object, names: Mapping[str, object]) -> None:
    """Check ``Explain``'s model function and column names (named, with what was expected and what came)."""
    if isinstance(model_fn, torch.nn.Module) or not callable(model_fn):
        raise TypeError(
            f"`model_fn` must be a function returning the model (e.g. `lambda: model`, so that each actor "
            f"builds or loads its own), got {describe(model_fn)}"
        )
    for name, value in names.items():
        if not isinstance(value, str) and (value is not None or name in ("column", "prefix")):
            kind = "a str" if name in ("column", "prefix") else "a column name (str) or None"
            raise TypeError(f"`{name}` must be {kind}, got {describe(value)}")


class Explain:
    """A callable class for ``ray.data.Dataset.map_batches`` explaining a column of every batch.

    Args:
        model_fn: called once, with no argument, by the first batch of an actor: returns the model (an
            ``nn.Module`` is moved to ``device``; any other callable is called as it is).
        modality: the input kind (``torchlime.Images(...)``, ``Tabular(training_data=...)``,
            ``torchlime.text.Words()`` for a column of strings, ...) or an integer feature map, as
            ``Explainer.explain`` takes it.
        explainer: how to explain (``torchlime.Explainer``; its ``batch_size`` is the rows per model call,
            apart from ``map_batches``' ``batch_size``, the inputs per ``Explain`` call); None: the defaults.
        call: what to explain (``torchlime.Call(target=..., n_samples=..., generator=...)``; None: the
            defaults); its ``generator`` is the int seed of every mask and random fill (None: 0);
            ``target="label"`` explains each row's label, read from ``label_column``.
        column: the column of the inputs (numeric arrays (b, ...), or strings for a text modality).
        index_column: the column of every input's global index (integers >= 0), which its masks follow;
            None: each batch's inputs take 0..b-1 (results then depend on the batching).
        label_column: the column of the labels that ``target="label"`` explains (they pass through).
        device: "auto" (the actor's GPU when Ray gave it one, outside Ray CUDA when there is some, else the
            CPU), or a device where the model and the inputs go.
        keep: what is returned besides the explanation's columns: "features", each input's feature map as
            the column ``features``; "inputs", the input column (left out by default; the other columns
            pass through).
        prefix: put before the names of the explanation's columns (e.g. ``"lime_"``), when the data has such columns.

    Raises:
        TypeError / ValueError: bad arguments (named, with what was expected and what came).

    Example:
        >>> import numpy as np, torchlime
        >>> weights = torch.randn(6, 3)
        >>> step = Explain(lambda: (lambda x: x @ weights), modality=torch.arange(6).view(1, 6), column="x",
        ...                call=torchlime.Call(n_samples=64, target="top2"))
        >>> out = step({"id": np.arange(4), "x": np.random.rand(4, 6).astype(np.float32)})
        >>> out["coef"].shape, sorted(out)[:5]
        ((4, 2, 6), ['coef', 'coef_se', 'id', 'intercept', 'local_pred'])
        >>> sorted(out)[5:]
        ['n_features', 'samples_used', 'score', 'target']
    """

    def __init__(  # noqa: PLR0913
        self,
        model_fn: Callable[[], Model],
        *,
        modality: ModalitySpec,
        explainer: Optional[Explainer] = None,
        call: Optional[Call] = None,
        column: str = "image",
        index_column: Optional[str] = "id",
        label_column: Optional[str] = None,
        device: Union[str, torch.device] = "auto",
        keep: Collection[str] = (),
        prefix: str = "",
    ) -> None:
        names = dict(column=column, prefix=prefix, index_column=index_column, label_column=label_column)
        _check_columns(model_fn, names)
        self.run = ModalityRun.checked(explainer, modality, call, "Explain")
        if self.run.by_label and label_column is None:
            raise ValueError("`target='label'` needs `label_column`, the column of each input's label, got None")
        kept = check_keep(keep, ())
        self.keep_features, self.keep_inputs = kept["keep_features"], kept["keep_inputs"]
        self.column, self.index_column, self.label_column, self.prefix = column, index_column, label_column, prefix
        self.device = _device(device)
        self.run = self.run.to(self.device)
        self.model_fn: Callable[[], Model] = model_fn
        self._model: Optional[Model] = None

    @property
    def model(self) -> Model:
        """The model, made by ``model_fn()`` on first use (once per actor) and moved to ``device``."""
        if self._model is None:
            model = self.model_fn()
            if not callable(model):
                raise TypeError(f"`model_fn` must return the model (a callable), got {describe(model)}")
            self._model = place(model, self.device)
        return self._model

    def __call__(self, batch: Mapping[str, object]) -> dict[str, np.ndarray]:
        """Explain one batch's inputs in one batched call.

        Args:
            batch: the batch as ``map_batches`` gives it with ``batch_format="numpy"``: column name ->
                array of b rows (never modified).

        Returns:
            The batch's columns (the input column only with ``keep_inputs``) and the explanation's.

        Raises:
            TypeError / ValueError: a batch that is no mapping, a missing column, indices that are not
                integers >= 0, explanation columns that the batch already has (see ``prefix``).
        """
        if not isinstance(batch, Mapping):
            raise TypeError(
                f"`batch` must be a dict of column -> array (map_batches(..., batch_format='numpy')), "
                f"got {describe(batch)}"
            )
        inputs, b = _inputs(_column(batch, self.column, "column"), self.column)
        index = None if self.index_column is None else _index(_column(batch, self.index_column, "index_column"), b)
        target: Any = UNSET
        if self.label_column is not None:
            labels = torch.as_tensor(np.array(_column(batch, self.label_column, "label_column"), copy=True))
            target = labels.to(self.device).long() if self.run.by_label else UNSET
        if isinstance(inputs, torch.Tensor):
            inputs = inputs.to(self.device)
        pos = torch.arange(b) if index is None else index
        exp = self.run(self.model, inputs, pos.to(self.device), target)
        rows = rows_of(exp, pos, None, None, self.keep_features)
        out = {name: np.asarray(value) for name, value in batch.items() if name != self.column or self.keep_inputs}
        for name, value in rows.items():
            if name in _NOT_RETURNED:
                continue
            if self.prefix + name in out:
                raise ValueError(
                    f"the batch already has a column {self.prefix + name!r}, a column of the explanation: give "
                    f"`prefix=` (e.g. 'lime_') to name the explanation's columns apart, got prefix={self.prefix!r}"
                )
            out[self.prefix + name] = (value.long() if name == "features" else value).numpy()  # one dtype
        return out


def explain_ray(
    ds: Any,
    model_fn: Callable[[], Model],
    *,
    batch_size: int = 32,
    actors: int = 1,
    num_gpus: float = 0,
    **options: Any,
) -> Any:
    """``ds.map_batches(Explain, ...)``: the explanations of a Ray data set, computed as Ray consumes it.

    Args:
        ds: a ``ray.data.Dataset`` with the inputs' column and an index column (see ``Explain``).
        model_fn: called once per actor, returns the model (see ``Explain``).
        batch_size: inputs per ``Explain`` call (one batched torchlime call).
        actors: actors in the pool, each with its own model.
        num_gpus: GPUs per actor (1: each actor explains on its own GPU).
        **options: ``Explain``'s keywords (modality, explainer, call, column, index_column, ...), checked
            here before Ray starts an actor (which calls ``model_fn`` with its first batch).

    Returns:
        The lazy ``ray.data.Dataset`` of the explanations (``.write_parquet(folder)``, ``.take_all()``, ...).

    Raises:
        ImportError: Ray is not installed (``pip install 'torchlime[ray]'``).
        TypeError / ValueError: bad arguments (named, with what was expected and what came).
    """
    data = require("ray.data", "ray", "explain_ray")
    if not isinstance(ds, data.Dataset):
        raise TypeError(f"`ds` must be a ray.data.Dataset, got {describe(ds)}")
    check_positive_int(batch_size, "batch_size")
    check_positive_int(actors, "actors")
    if isinstance(num_gpus, bool) or not isinstance(num_gpus, (int, float)) or num_gpus < 0:
        raise TypeError(f"`num_gpus` must be a number >= 0, got {describe(num_gpus)}")
    Explain(model_fn, **options)  # checks every argument; the model is made by each actor's first batch
    return ds.map_batches(
        Explain,
        fn_constructor_args=(model_fn,),
        fn_constructor_kwargs=options,
        batch_size=int(batch_size),
        batch_format="numpy",
        compute=data.ActorPoolStrategy(size=int(actors)),
        num_gpus=num_gpus,
    )


def _device(device: object) -> torch.device:
    """The device of ``device="auto"`` (see ``Explain``), or the one given."""
    if isinstance(device, str) and device == "auto":
        if not torch.cuda.is_available():
            return torch.device("cpu")
        ray = sys.modules.get("ray")  # asked only where Ray is imported, as it always is in a Ray actor
        if ray is not None and ray.is_initialized() and ray.get_runtime_context().get_actor_id() is not None:
            return torch.device("cuda" if ray.get_gpu_ids() else "cpu")
        return torch.device("cuda")
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"`device` must be 'auto', a str or a torch.device, got {describe(device)}")
    try:
        return torch.device(device)
    except RuntimeError as err:
        raise ValueError(f"`device` must be 'auto' or a device name such as 'cpu' or 'cuda:0', got {device!r}") from err


def _column(batch: Mapping[str, object], name: str, argument: str) -> object:
    if name not in batch:
        hint = " (or index_column=None: each batch then takes 0..b-1)" if argument == "index_column" else ""
        raise ValueError(
            f"`{argument}` must name a column of the batch, got {name!r}; the batch has {sorted(batch)}{hint}"
        )
    return batch[name]


def _inputs(value: object, name: str) -> tuple[Union[torch.Tensor, list[str]], int]:
    """A column as the front doors take it: a tensor (a copy), or a list of strings; and its length."""
    array = np.asarray(value)
    if array.ndim == 0:
        raise ValueError(f"`column` {name!r} must hold one input per row, got {describe(array)}")
    if array.dtype.kind in "US" or (array.dtype == object and all(isinstance(v, str) for v in array.ravel())):
        return [str(v) for v in array.tolist()], array.shape[0]
    if array.dtype == object:  # a column of arrays (Ray's variable-shaped tensors): one shape per batch
        shapes = {np.shape(v) for v in array}
        if len(shapes) != 1:
            raise ValueError(
                f"`column` {name!r} must hold inputs of one shape per batch, got the shapes {sorted(shapes)[:5]}"
            )
        array = np.stack([np.asarray(v) for v in array])
    if array.dtype.kind not in "biuf":
        raise TypeError(f"`column` {name!r} must hold numbers or strings, got {describe(array)}")
    return torch.from_numpy(np.array(array, copy=True)), array.shape[0]


def _index(value: object, b: int) -> torch.Tensor:
    array = np.asarray(value)
    if array.dtype.kind not in "iu":
        raise TypeError(f"`index_column` must hold integers (each input's global index), got {describe(array)}")
    if array.shape != (b,):
        raise ValueError(f"`index_column` must hold one index per input, shape ({b},), got {describe(array)}")
    if b and int(array.min()) < 0:
        raise ValueError(f"`index_column` must hold indices >= 0, got the minimum {int(array.min())}")
    return torch.from_numpy(array.astype(np.int64))
