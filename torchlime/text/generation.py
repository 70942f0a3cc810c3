"""``explain_generation``: LIME for the text a causal LM generates (the ``Generation`` modality in one call).

The prompt's tokens are the features; the target is the teacher-forced log-probability of a continuation
(``torchlime.targets.Continuation``), given or generated greedily: ``_generation.Generation`` pads, generates
and hands the engine the rows of prompt and continuation; ``_generated.GenerationInfo`` names them.
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

import torch
from typing_extensions import Unpack

from torchlime.engine import Call, ExplainOptions, Explanation, documented, explain_with
from torchlime.targets.continuation import Continuation
from torchlime.text._generation import Generation
from torchlime.text._prompts import Tokenizer
from torchlime.text._token_args import InfillSpec, SpecialIds
from torchlime.typing import UNSET, Model, NSamples, Seed, Unset


@documented
def explain_generation(  # noqa: D417, PLR0913
    model: Model,
    input_ids: Union[torch.Tensor, str, Sequence[str]],
    *,
    attention_mask: Optional[torch.Tensor] = None,
    word_ids: Optional[torch.Tensor] = None,
    special_ids: SpecialIds = None,
    mode: str = "replace",
    mask_id: Optional[int] = None,
    pad_id: int = 0,
    vocab_size: Optional[int] = None,
    model_inputs: str = "auto",
    infill: InfillSpec = None,
    tokenizer: Optional[Tokenizer] = None,
    target: Union[Continuation, None, Unset] = UNSET,
    n_samples: Union[NSamples, Unset] = UNSET,
    generator: Seed = None,
    **options: Unpack[ExplainOptions],
) -> Explanation:
    """Explain what a causal LM generates after B prompts, with LIME over the prompts' tokens or words.

    ``Explainer(...).explain(model, input_ids, Generation(...), target=...)`` in one call: the same numbers.
    The modality's fields are described on ``torchlime.text.Generation``.

    Args:
        model: causal LM taking ids (c, L) and a mask (see ``model_inputs``), returning logits (c, L, V)
            or an object with ``.logits`` (a Hugging Face ``*ForCausalLM``).
        input_ids: integer (B, L_p) prompts, or text: a str or a list of B str with ``tokenizer``.
        attention_mask: (B, L_p) 1 = token, 0 = padding, as in ``Generation``.
        word_ids: (B or 1, L_p) word of every prompt token, as in ``Generation``.
        special_ids: ids never perturbed (BOS, ...), as in ``Generation``.
        mode: "replace", "delete" or "infill", as in ``Generation``.
        mask_id: the id hidden prompt tokens become, as in ``Generation``.
        pad_id: the padding id of "delete" rows, as in ``Generation``.
        vocab_size: the model's vocabulary size, as in ``Generation``.
        model_inputs: how the model takes ids and mask, as in ``Generation``.
        infill: the masked LM of ``mode="infill"``, as in ``Generation``.
        tokenizer: tokenizes text prompts and names the tokens, as in ``Generation``.
        target: a ``Continuation`` (unset or None: ``Continuation()``): its ``token_ids`` (B, G), or G =
            ``max_new_tokens`` ids generated greedily; ``per_token`` gives T = 1 + G, else T = 1.
        generator: seed or ``torch.Generator`` of the masks.
        **options: the engine's options (``ExplainOptions``) but those the modality sets itself
            (``baseline``: the fill is ``mode``; ``perturb_fn``, ``normalize``, ``chunk_format``,
            ``additional_forward_args``).

    Returns:
        ``Explanation`` over the (B, L) rows: coef (B, T, F), features (B, L) (-1 on padding, special
        ids and the continuation), with ``return_samples`` outputs (B, S, T) log-probabilities; ``info``
        a ``GenerationInfo``: the continuation (B, G) and the rows explained with their mask (B, L)
        (``info.continuation``, ``info.input_ids``, ``info.attention_mask``), the prompt's features and
        the generated tokens named (``prompt_tokens``, ``generated_tokens``) for
        ``torchlime.text.viz.explanation_html(exp, index)`` and the notebook display.

    Raises:
        TypeError / ValueError: naming the argument, expected and got value.

    Example:
        >>> lm = lambda input_ids: torch.nn.functional.one_hot(input_ids.roll(1, 1), 16).float() * 4
        >>> exp = explain_generation(lm, torch.tensor([[3, 5, 7]]), mask_id=0, n_samples=64,
        ...                          target=Continuation(max_new_tokens=2))
        >>> exp.coef.shape, exp.info.continuation.shape          # (B, 1 + G, F), (B, G)
        (torch.Size([1, 3, 3]), torch.Size([1, 2]))
    """
    modality = Generation(
        attention_mask, word_ids, special_ids, mode, mask_id, pad_id, vocab_size, model_inputs, infill, tokenizer
    )
    call = Call(target, n_samples, generator)
    return explain_with(model, input_ids, modality, call, options, "explain_generation")
