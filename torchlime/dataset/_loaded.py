"""Rows of a result folder read into memory: ``Results`` (what slicing a ``LazyResults`` returns).

``Results.explanation()`` turns the rows into an ``Explanation`` (with the stored feature maps) to paint
(``heatmap``) and draw.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from torchlime.dataset._explanation import NO_MAPS, RowsInfo, checked_features, checked_shape
from torchlime.engine.explanation import Explanation
from torchlime.stages.standard_error import CoefSE


@dataclass
class Results:
    """Explanations of n inputs of a data set (a slice of a result folder, all in memory).

    Attributes:
        index: long (n,) global index of each input in the data set.
        coef: (n, T, F) coefficients; F is the largest feature count of the folder, and
            coefficients of features f >= ``n_features[i]`` are 0 padding (see ``valid``).
        intercept: (n, T) surrogate intercept.
        score: (n, T) weighted R² of the surrogate; NaN on padded targets.
        local_pred: (n, T) surrogate prediction at the input.
        target: long (n, T) explained output columns.
        n_features: long (n,) F_b of each input.
        samples_used: long (n,) samples each input got (n_samples="auto" varies it), or None.
        label: (n, ...) the labels the data yielded with the inputs, or None.
        coef_std: (n, T, F) posterior standard deviations (Bayesian surrogates), or None.
        coef_se: (n, T, F) the standard errors of the other surrogates (``Explanation.coef_se``), or None
            (none computable, or a folder of an earlier format).
        target_valid: bool (n, T) the targets that exist (structured targets, whose count differs between
            inputs: padded ones have coefficients 0 and ``target`` -1), or None.
        features: long (n, *fshape) each input's feature map (ids -1..F_b-1; ``Explanation.features``), or
            None: not stored (a folder of the second format, or ``keep`` without "features").
        inputs: (n, ...) the inputs as the data gave them (``keep`` with "inputs"), or None.
        input_shape: the shape of one input (the explanation's ``input_shape``), or None when unknown.
    """

    index: torch.Tensor
    coef: torch.Tensor
    intercept: torch.Tensor
    score: torch.Tensor
    local_pred: torch.Tensor
    target: torch.Tensor
    n_features: torch.Tensor
    samples_used: Optional[torch.Tensor] = None
    label: Optional[torch.Tensor] = None
    coef_std: Optional[torch.Tensor] = None
    coef_se: Optional[torch.Tensor] = None
    target_valid: Optional[torch.Tensor] = None
    features: Optional[torch.Tensor] = None
    inputs: Optional[torch.Tensor] = None
    input_shape: Optional[tuple[int, ...]] = None

    @property
    def valid(self) -> torch.Tensor:
        """Bool (n, F): features that exist for each input (False on padding)."""
        return torch.arange(self.coef.shape[-1]) < self.n_features.unsqueeze(1)

    def explanation(
        self, features: Optional[torch.Tensor] = None, input_shape: Optional[tuple[int, ...]] = None
    ) -> Explanation:
        """These rows as an ``Explanation`` (B = n), to paint (``heatmap``) and draw.

        Args:
            features: long (n or 1, *fshape) feature maps to use; None: the stored ones.
            input_shape: the shape of one input; None: the stored one, else ``features``' (without B).

        Returns:
            An ``Explanation`` with ``coef`` (n, T, F), the fit, ``features`` and ``n_features``; ``meta``
            holds ``samples_used`` and ``index`` (the global indices); no recorded perturbation.

        Raises:
            ValueError: no feature maps stored nor given (a folder of the second format, or
                ``keep`` without "features": rebuild them as the run made them and pass ``features``), or maps
                that do not fit the rows. TypeError: maps or a shape of the wrong type.

        Example:
            >>> import tempfile, torchlime
            >>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
            >>> feats = torch.arange(16).view(1, 1, 4, 4) // 4
            >>> with tempfile.TemporaryDirectory() as out:
            ...     _ = torchlime.dataset.explain_dataset(model, torch.rand(6, 1, 4, 4), out, modality=feats,
            ...             call=torchlime.Call(n_samples=32), progress=False)
            ...     exp = torchlime.dataset.load_results(out)[2:4].explanation()
            >>> exp.heatmap(0).shape
            torch.Size([2, 1, 4, 4])
        """
        n, f_max = self.coef.shape[0], self.coef.shape[-1]
        if features is not None:
            feats = checked_features(features, n, f_max)
        elif self.features is not None:
            feats = self.features.long()
        else:
            raise ValueError(
                f"`features` must be given: {NO_MAPS}; rebuild the maps as the run made them (e.g. the images' "
                f"segments) and pass them as features=(n or 1, *fshape), or explain into a new folder, which keeps them"
            )
        if input_shape is not None:
            shape = checked_shape(input_shape, feats)
        elif self.input_shape is not None and features is None:
            shape = tuple(self.input_shape)
        else:
            shape = tuple(feats.shape[1:])
        info = None if self.samples_used is None else RowsInfo(self.samples_used.tolist())
        return Explanation(
            self.coef,
            self.intercept,
            self.score,
            self.local_pred,
            self.target,
            feats,
            self.n_features,
            shape,
            coef_std=self.coef_std,
            coef_se_record=None if self.coef_se is None else CoefSE("stored", self.coef_se),
            target_valid=self.target_valid,
            info=info,
        )

    def heatmap(self, target_index: Optional[int] = None) -> torch.Tensor:
        """Coefficients painted back onto the inputs with the stored feature maps (``Explanation.heatmap``).

        Args:
            target_index: which of the T targets; None keeps all.

        Returns:
            (n, T, *input_shape), or (n, *input_shape) with ``target_index``.

        Raises:
            ValueError: no feature maps stored (see ``explanation``).
        """
        return self.explanation().heatmap(target_index)

    def __len__(self) -> int:
        return self.index.shape[0]

    def __repr__(self) -> str:
        n, t, f = self.coef.shape
        return f"Results of {n} input(s): {t} target(s), up to {f} features (coef {tuple(self.coef.shape)})"
