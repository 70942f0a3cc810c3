"""Named bundles of defaults that reproduce other LIME implementations: one system for every modality.

A preset fills every keyword the caller did not pass; keywords passed explicitly always win. Each
preset has settings for any modality (``"any"``) and, where the reference implementation differs by
modality, settings for ``"image"``, ``"audio"``, ``"text"`` or ``"tabular"`` on top (``resolve``
lists them). ``ENGINE`` holds torchlime's own defaults.
"""

from __future__ import annotations

from typing import Any, Optional, cast

from torchlime._util.checks import check_choice
from torchlime.methods.designs import FactorialSampler
from torchlime.methods.kernel_shap import KernelShapRegression, KernelShapSampler, ShapleyKernel
from torchlime.methods.shap_designs import ShapDesign
from torchlime.stages.sampling import BernoulliSampler, UniformCountSampler
from torchlime.stages.surrogate import Lasso, Ridge
from torchlime.stages.weighting import ExponentialKernel
from torchlime.typing import UNSET, PresetName, PresetScope

#: the input kinds a preset may have settings for
SCOPES: tuple[PresetScope, ...] = ("any", "image", "audio", "text", "tabular")

#: the six keywords every complete bundle sets, in the order of ``_bundle``'s values
_BUNDLE = ("target", "n_samples", "baseline", "sampler", "kernel", "surrogate")


def _bundle(*values: Any) -> dict[str, Any]:
    """A complete bundle: ``values`` in the order of ``_BUNDLE``."""
    return dict(zip(_BUNDLE, values, strict=True))


#: torchlime's own defaults, as a bundle (target, N, fill, sampler, kernel, surrogate). Masks: the factorial
#: design (Sobol's columns beyond 64 features, Bernoulli(1/2) beyond what the first samples tell apart) and a
#: small ridge penalty: at equal model calls their coefficients were closer to an N = 16384 reference than
#: Bernoulli(1/2) with Ridge(alpha=1)'s on every model of ``benchmarks/bench_lime_designs.py``, and closer than
#: the Sobol design's (``results/lime_designs_cpu.json``)
ENGINE = _bundle(
    None,
    1000,
    0.0,
    FactorialSampler(0.5, fallback=BernoulliSampler(0.5)),
    ExponentialKernel(width=0.25),
    Ridge(alpha=0.01),
)

#: the engine's own settings for one input kind, under every preset (images: lime's per-segment mean
#: colour as the fill; a black fill gave a median weighted R² of 0.43 against 0.98 on the demo model,
#: ``benchmarks/results/default_segments_cpu.json``)
ENGINE_BY_SCOPE: dict[str, dict[str, Any]] = {"image": dict(baseline="mean")}

_LIME_TEXT = _bundle(None, 5000, 0.0, UniformCountSampler(), ExponentialKernel(width=25.0, scale=100.0), Ridge(1.0))
_SLIME = dict(
    n_samples=8192, sampler=BernoulliSampler(0.5), kernel=ExponentialKernel(width=0.25), surrogate=Ridge(alpha=1.0)
)


def _kernel_shap(design: ShapDesign) -> dict[str, Any]:
    """``preset="kernel_shap"``'s bundle with the sampled ``design``."""
    sampler, kernel = KernelShapSampler(design=design), ShapleyKernel(design=design)
    return _bundle(None, 2048, 0.0, sampler, kernel, KernelShapRegression())


PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "lime": {
        "any": _bundle("top5", 1000, "mean", BernoulliSampler(0.5), ExponentialKernel(width=0.25), Ridge(alpha=1.0)),
        "image": dict(segments="quickshift"),  # quickshift(kernel_size=4, max_dist=200, ratio=0.2)
        "text": _LIME_TEXT,
        # LimeTabularExplainer: N = 5000, Ridge(1); the top class (lime's labels=(1,): pass target=1).
        # Its sampler, kernel (euclidean on the scaled rows, width 0.75·sqrt(D)) and values come
        # from torchlime.tabular.explain_tabular, which builds them from the training data.
        "tabular": dict(target=None, n_samples=5000, surrogate=Ridge(alpha=1.0)),
    },
    "lime_text": {"any": _LIME_TEXT},
    "captum": {
        "any": _bundle(None, 25, 0.0, BernoulliSampler(0.5), ExponentialKernel(width=1.0, space="input"), Lasso(0.01))
    },
    "slime": {"any": _SLIME},
    "veracity": {"any": _SLIME},
    # KernelSHAP (torchlime.methods.kernel_shap): every coalition when 2^F <= N, else Leverage SHAP's design (pairs
    # z, 1 - z, sizes uniformly, without replacement), the Shapley kernel over the inclusion probability as weights,
    # least squares with phi_0 = f(baseline) and phi_0 + sum(phi) = f(x) imposed exactly; the fill is the reference
    "kernel_shap": {"any": _kernel_shap("leverage")},
    # the same with captum's plain design: sizes in proportion to the Shapley kernel, with replacement, unpaired
    "kernel_shap_plain": {"any": _kernel_shap("plain")},
}


def check_preset(preset: object) -> Optional[PresetName]:
    """Raise ``ValueError`` unless ``preset`` is None or a name in ``PRESETS``.

    Args:
        preset: the value to check.

    Returns:
        ``preset`` itself.
    """
    if preset is not None and preset not in PRESETS:
        raise ValueError(f"`preset` must be None or one of {list(PRESETS)}, got {preset!r}")
    return cast(Optional[PresetName], preset)  # a key of PRESETS


def resolve(preset: Optional[str], given: dict[str, Any], modality: PresetScope = "any") -> dict[str, Any]:
    """Resolve keywords: explicit > preset for the modality > preset for any > engine defaults.

    Args:
        preset: None or a name in ``PRESETS``: "lime" (lime's explainer of the modality:
            ``LimeImageExplainer``'s quickshift superpixels, mean-colour fill, Bernoulli(1/2), cosine
            kernel 0.25, Ridge(1), N = 1000, top 5 labels; for tokens ``LimeTextExplainer``'s: remove
            k ~ U{1..D} words, cosine x 100 with width 25, N = 5000; for tabular data
            ``LimeTabularExplainer``'s N = 5000, Ridge(1)), "lime_text" (``LimeTextExplainer``'s
            settings for any modality), "captum" (captum's ``Lime``: N = 25, fill 0, exp(-d²/2) on the
            input-space cosine distance, Lasso(alpha=0.01)), "slime" or "veracity" (SLIME / the audio
            veracity study: Bernoulli(1/2), cosine kernel 0.25, Ridge(1), N = 8192), "kernel_shap"
            (``methods.kernel_shap``: every coalition when 2^F <= N, else Leverage SHAP's paired design
            without replacement, the Shapley kernel's weights, the constrained fit; N = 2048),
            "kernel_shap_plain" (the same with captum's plain design: sizes by the Shapley kernel, with
            replacement, unpaired).
        given: keyword -> value, ``UNSET`` where the caller passed nothing.
        modality: "any", "image", "audio", "text" or "tabular".

    Returns:
        ``given`` with every ``UNSET`` replaced (None where no default exists).

    Raises:
        ValueError: for an unknown preset name.

    Example:
        >>> resolve("lime", dict(n_samples=UNSET, baseline=0.5))
        {'n_samples': 1000, 'baseline': 0.5}
    """
    name = check_preset(preset)
    check_choice(modality, "modality", SCOPES)
    base = {**ENGINE, **ENGINE_BY_SCOPE.get(modality, {})}
    if name is not None:
        base.update(PRESETS[name]["any"])
        base.update(PRESETS[name].get(modality, {}))
    return {k: (base.get(k) if v is UNSET else v) for k, v in given.items()}


def defaults(preset: Optional[str], scope: PresetScope = "any") -> dict[str, Any]:
    """Every setting the preset (None: the engine) gives for ``scope``, the engine's under it.

    Args:
        preset: None or a name in ``PRESETS``.
        scope: "any", "image", "audio", "text" or "tabular".

    Returns:
        field -> value, for ``config.fill_unset``.
    """
    return resolve(preset, dict.fromkeys(set(ENGINE) | _named(preset, scope), UNSET), scope)


def _named(preset: Optional[str], scope: PresetScope) -> set[str]:
    """The keys ``preset`` sets for any input kind and for ``scope``."""
    if preset is None or preset not in PRESETS:
        return set()
    return set(PRESETS[preset]["any"]) | set(PRESETS[preset].get(scope, {}))
