"""``repr(explanation)``: a few lines on what an ``Explanation`` holds (no tensor dumps)."""

from __future__ import annotations

from typing import Any

import torch

from torchlime._util.checks import check_positive_int
from torchlime.engine.info import describe_inputs

#: an ``engine.explanation.Explanation`` (not imported: the explanation imports this module)
Explanation = Any


def _se_line(exp: Explanation) -> str:
    """The standard errors' line: how they were computed and their median relative size, or why none."""
    se = exp.coef_se
    method = exp.se_method
    if se is None:
        if method == "bootstrap":
            return "  coef_se: none (the bootstrap resamples kept samples: return_samples=True)"
        return "  coef_se: none for this surrogate"
    keep = exp.valid.to(se.device).unsqueeze(1).expand_as(se)
    if exp.target_valid is not None:
        keep = keep & exp.target_valid.to(se.device).unsqueeze(-1)
    values = se[keep].float()
    if not values.numel():
        return f"  coef_se ({method}): no real coefficient"
    coef = exp.coef.to(se.device)[keep].abs().float()
    ratio = values / coef.amax().clamp_min(torch.finfo(torch.float32).tiny)
    return f"  coef_se ({method}): median {float(values.median()):.3g}, {float(ratio.median()):.3g} of max |coef|"


def summary(exp: Explanation) -> str:
    """``repr(exp)``: inputs, targets, features, samples, surrogate, fit quality and standard errors.

    Args:
        exp: the explanation, coef (B, T, F).

    Returns:
        A few lines of text.
    """
    b, t, _ = exp.coef.shape
    nf = exp.n_features.tolist()
    feats = f"{nf[0]}" if len(set(nf)) == 1 else f"{min(nf)}-{max(nf)}"
    score = exp.score.float()
    real = score if exp.target_valid is None else score[exp.target_valid.to(score.device)]
    padded = "" if exp.target_valid is None else f" over the {real.numel()} real targets"
    quality = "no real target"
    if real.numel():
        quality = f"median {float(real.median()):.3f}, min {float(real.min()):.3f}{padded}"
    targets = exp.target[:4].tolist()
    inputs = describe_inputs(b, exp.input_shape, exp.info)
    shown = exp.meta  # the records' rendering (a file of another version: its stored entries)
    lines = [
        f"Explanation of {inputs}: {t} target(s) and {feats} features each",
        f"  targets: {targets}{' ...' if b > 4 else ''}",
        f"  {shown.get('n_samples', '?')} samples per input, surrogate {shown.get('surrogate', '?')}",
        f"  weighted R²: {quality}",
        _se_line(exp),
    ]
    if exp.samples is not None:
        outputs = None if exp.outputs is None else tuple(exp.outputs.shape)
        lines.append(f"  samples kept: masks {tuple(exp.samples.shape)}, outputs {outputs}")
    return "\n".join(lines)


def top_features(exp: Explanation, k: int, by: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``Explanation.top_features``: indices and signed values (B, T, k') of the k strongest features.

    Args:
        exp: the explanation, coef (B, T, F).
        k: how many features.
        by: "abs", "value" or "t" (|coef| / coef_se).

    Returns:
        ``(indices, values)``, each (B, T, min(k, F)).

    Raises:
        ValueError: another ``by``, "t" without standard errors, or ``k`` not a positive int.
    """
    check_positive_int(k, "k")
    if by not in ("value", "abs", "t"):
        raise ValueError(f"`by` must be 'value', 'abs' or 't', got {by!r}")
    if by == "t":
        se = exp.coef_se
        if se is None:
            raise ValueError(
                f"`by` 't' ranks by |coef| / coef_se, but this explanation has no standard errors "
                f"(se_method {exp.se_method!r}); rank by 'abs'"
            )
        size = exp.coef.abs().double()
        key = torch.where(size > 0, size / se.to(size).clamp_min(0), 0.0)  # se 0: +inf for a nonzero coef
    else:
        key = exp.coef.abs() if by == "abs" else exp.coef
    key = key.masked_fill(~exp.valid.unsqueeze(1), float("-inf"))
    k = min(k, exp.coef.shape[-1])
    if by == "t":  # ties (standard errors of 0: an enumerated KernelSHAP input) rank by |coef|
        order = exp.coef.abs().argsort(dim=-1, descending=True, stable=True)
        idx = order.gather(-1, key.gather(-1, order).argsort(dim=-1, descending=True, stable=True)[..., :k])
    else:
        _, idx = key.topk(k, dim=-1)
    values = exp.coef.gather(-1, idx)
    if exp.target_valid is not None:
        real = exp.target_valid.to(idx.device).unsqueeze(-1)
        idx, values = torch.where(real, idx, -1), torch.where(real, values, 0.0)
    return idx, values
