"""Vision transformers taken as they are, split where a token can be left out.

A family adapter cuts a model into ``embed`` (the patch embedding, the prefix tokens and the
position embeddings: everything a token gets before the first block) and ``encode`` (the blocks,
the final norm and the head), each made of the model's own submodules. Leaving a patch token out
between the two is what "dropping" means: the kept tokens keep their own position embeddings and
the attention never sees the others. ``encode(embed(x))`` is ``model(x)`` (tests check it per family).

Families: torchvision's ``VisionTransformer``, timm's ``VisionTransformer`` (and its subclasses such as
DeiT's distilled model), Hugging Face's ``ViTForImageClassification``.
"""

from __future__ import annotations

import abc
from typing import Any, Optional, cast

import torch
from torch import nn

SUPPORTED = (
    "torchvision.models.VisionTransformer",
    "timm VisionTransformer (and DeiT)",
    "transformers ViTForImageClassification",
)


class ViTFamily(abc.ABC):
    """A vision transformer split around its token sequence.

    Attributes:
        name: the family, for messages and records.
        model: the wrapped model (its own submodules do the work).
        patch: the patch side in pixels.
        image_size: (H, W) the input size the model takes.
        n_prefix: tokens before the patch tokens (class, distillation, register tokens), always kept.
    """

    name: str = ""

    def __init__(self, model: nn.Module, patch: int, image_size: tuple[int, int], n_prefix: int) -> None:
        self.model, self.patch, self.image_size, self.n_prefix = model, patch, image_size, n_prefix

    @property
    def grid(self) -> tuple[int, int]:
        """(rows, columns) of the patch grid."""
        return self.image_size[0] // self.patch, self.image_size[1] // self.patch

    @abc.abstractmethod
    def embed(self, images: torch.Tensor) -> torch.Tensor:
        """Tokens (n, n_prefix + P, D) of images (n, C, H, W), position embeddings added.

        Args:
            images: (n, C, H, W) model inputs (normalised as the model wants).
        """

    @abc.abstractmethod
    def encode(self, tokens: torch.Tensor) -> torch.Tensor:
        """Outputs (n, K) of token sequences (n, t, D): the blocks, the final norm and the head.

        Args:
            tokens: (n, t, D) the prefix tokens followed by any subset of the patch tokens.
        """


class TorchvisionViT(ViTFamily):
    """``torchvision.models.VisionTransformer``: ``conv_proj``, ``class_token``, ``encoder``, ``heads``."""

    name = "torchvision"

    def __init__(self, model: nn.Module) -> None:
        size = int(cast(int, model.image_size))
        super().__init__(model, int(cast(int, model.patch_size)), (size, size), 1)

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        """Tokens (n, 1 + P, D) with the class token first (``ViTFamily.embed``).

        Args:
            images: (n, C, H, W) model inputs.
        """
        m = cast(Any, self.model)
        x = m._process_input(images)
        x = torch.cat([m.class_token.expand(x.shape[0], -1, -1), x], dim=1)
        return cast(torch.Tensor, x + m.encoder.pos_embedding)

    def encode(self, tokens: torch.Tensor) -> torch.Tensor:
        """The encoder's dropout, layers and norm, then the heads on the class token (``ViTFamily.encode``).

        Args:
            tokens: (n, t, D) token sequences.
        """
        enc = cast(Any, self.model).encoder
        x = enc.ln(enc.layers(enc.dropout(tokens)))
        return cast(torch.Tensor, cast(Any, self.model).heads(x[:, 0]))


class TimmViT(ViTFamily):
    """timm's ``VisionTransformer``: ``patch_embed``, ``_pos_embed``, ``blocks``, ``norm``, ``forward_head``."""

    name = "timm"

    def __init__(self, model: nn.Module) -> None:
        m = cast(Any, model)
        if getattr(m, "dynamic_img_size", False):
            raise ValueError("`model`: timm models with dynamic_img_size=True cannot drop tokens yet")
        patch = m.patch_embed.patch_size
        grid = m.patch_embed.grid_size
        p = int(patch[0] if isinstance(patch, (tuple, list)) else patch)
        super().__init__(model, p, (int(grid[0]) * p, int(grid[1]) * p), int(m.num_prefix_tokens))

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        """Tokens (n, prefix + P, D) after the pre-norm (``ViTFamily.embed``); per-token work only.

        Args:
            images: (n, C, H, W) model inputs.
        """
        m = cast(Any, self.model)
        return cast(torch.Tensor, m.norm_pre(m.patch_drop(m._pos_embed(m.patch_embed(images)))))

    def encode(self, tokens: torch.Tensor) -> torch.Tensor:
        """The blocks, the norm and the model's own head (its pooling over the kept tokens).

        Args:
            tokens: (n, t, D) token sequences.
        """
        m = cast(Any, self.model)
        return cast(torch.Tensor, m.forward_head(m.norm(m.blocks(tokens))))


class HuggingFaceViT(ViTFamily):
    """``transformers`` ``ViTForImageClassification``: ``vit.embeddings``, its layers, ``layernorm``, ``classifier``."""

    name = "transformers"

    def __init__(self, model: nn.Module) -> None:
        cfg = cast(Any, model).config
        size = cfg.image_size if isinstance(cfg.image_size, (tuple, list)) else (cfg.image_size, cfg.image_size)
        patch = cfg.patch_size if isinstance(cfg.patch_size, int) else cfg.patch_size[0]
        super().__init__(model, int(patch), (int(size[0]), int(size[1])), 1)
        vit = cast(Any, model).vit
        self.layers = vit.layers if hasattr(vit, "layers") else vit.encoder.layer

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        """The model's embeddings module: patches, class token, position embeddings (``ViTFamily.embed``).

        Args:
            images: (n, C, H, W) model inputs.
        """
        vit = cast(Any, self.model).vit
        dtype = vit.embeddings.patch_embeddings.projection.weight.dtype
        return cast(torch.Tensor, vit.embeddings(images.to(dtype)))

    def encode(self, tokens: torch.Tensor) -> torch.Tensor:
        """Each layer, the final layer norm and the classifier on the class token (``ViTFamily.encode``).

        Args:
            tokens: (n, t, D) token sequences.
        """
        vit = cast(Any, self.model).vit
        x = tokens
        for layer in self.layers:  # a dozen blocks, not samples
            out = layer(x)
            x = out[0] if isinstance(out, tuple) else out
        return cast(torch.Tensor, cast(Any, self.model).classifier(vit.layernorm(x)[:, 0]))


def _is_timm(model: nn.Module) -> bool:
    needed = ("patch_embed", "_pos_embed", "blocks", "norm", "forward_head", "num_prefix_tokens")
    return type(model).__module__.startswith("timm.") and all(hasattr(model, a) for a in needed)


def vit_family(model: object) -> ViTFamily:
    """The family adapter of ``model``.

    Args:
        model: a vision transformer (unwrapped: the module itself).

    Returns:
        Its ``ViTFamily``.

    Raises:
        TypeError: ``model`` is none of the supported families (named in the message).
    """
    found: Optional[ViTFamily] = None
    if isinstance(model, nn.Module):
        mod = type(model).__module__
        if mod.startswith("torchvision.") and hasattr(model, "conv_proj") and hasattr(model, "class_token"):
            found = TorchvisionViT(model)
        elif _is_timm(model):
            found = TimmViT(model)
        elif mod.startswith("transformers.") and hasattr(model, "vit") and hasattr(model, "classifier"):
            found = HuggingFaceViT(model)
    if found is None:
        raise TypeError(
            f"baseline='drop' leaves patch tokens out of a vision transformer's sequence, so it needs one of: "
            f"{', '.join(SUPPORTED)}; got {type(model).__module__}.{type(model).__qualname__} "
            "(use a fill such as baseline='mean' for other models)"
        )
    return found
