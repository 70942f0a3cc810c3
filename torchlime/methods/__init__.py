"""The method zoo of the LIME literature, each a plug-in of the engine's stage hooks.

``designs`` (stratified, antithetic, Sobol and factorial masks) with ``aberration`` (the factorial masks'
columns), ``adaptive`` (``n_samples="auto"``) with ``lime_precision`` (its default rule),
``kernel_shap`` (KernelSHAP) with ``shap_designs`` (its paired and Leverage SHAP designs) and ``shap_error``
(their standard errors), ``baylime``
(BayLIME's Bayesian ridge), ``smile`` (SMILE's statistical-distance kernels), ``feature_selection``
(lime's feature selection, with the LARS-lasso path of ``stages.lars``) and ``sp_lime`` (SP-LIME's
submodular pick). Methods import only the stages, never the engine.
"""

from torchlime.methods import (
    aberration,
    adaptive,
    baylime,
    designs,
    feature_selection,
    kernel_shap,
    lime_precision,
    shap_designs,
    shap_error,
    smile,
    sp_lime,
)

__all__ = [
    "designs",
    "aberration",
    "adaptive",
    "lime_precision",
    "kernel_shap",
    "shap_designs",
    "shap_error",
    "baylime",
    "smile",
    "feature_selection",
    "sp_lime",
]
