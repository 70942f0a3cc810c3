"""KernelSHAP through the engine with one design on sampler and kernel and a float64 fit, quietly."""

from __future__ import annotations

import warnings

import torch

from torchlime import explain
from torchlime.engine.quality import UnreliableExplanationWarning
from torchlime.methods.kernel_shap import KernelShapRegression, KernelShapSampler, ShapleyKernel


def kernel_shap(model, x, feats, n_samples, design="leverage", seed=0, **kw):
    """``explain(preset="kernel_shap")`` with ``design`` on the sampler and the kernel, a float64 fit, seed
    ``seed``; the quality warnings are silenced (a linear surrogate of an MLP or a game with interactions fits
    poorly: not what these tests check)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreliableExplanationWarning)
        return explain(
            model,
            x,
            feats,
            preset="kernel_shap",
            n_samples=n_samples,
            sampler=KernelShapSampler(design=design),
            kernel=ShapleyKernel(design=design),
            surrogate=KernelShapRegression(dtype=torch.float64),
            generator=seed,
            **kw,
        )
