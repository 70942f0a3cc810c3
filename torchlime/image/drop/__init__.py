"""Token dropping for vision transformers: ``explain_image(model, images, baseline="drop")``.

A hidden patch is not greyed or blurred: its token leaves the sequence, so the model never sees a
fill it was not trained on (the missingness bias of fills, Jain et al., ICLR 2022), and a sample
keeping half of its patches costs about half of the MLP work and a quarter of the attention.
Submodules: ``families`` (the supported models, cut around their token sequence), ``perturb``
(the engine's perturbation and the model it runs), ``PatchTokens``
(the hand-over to the engine).
"""

from torchlime.image.drop._patch_tokens import PatchTokens, snap_to_patches
from torchlime.image.drop.families import SUPPORTED, HuggingFaceViT, TimmViT, TorchvisionViT, ViTFamily, vit_family
from torchlime.image.drop.perturb import DropModel, DroppedTokens, PatchDrop

__all__ = [
    "PatchTokens",
    "snap_to_patches",
    "ViTFamily",
    "vit_family",
    "TorchvisionViT",
    "TimmViT",
    "HuggingFaceViT",
    "SUPPORTED",
    "DropModel",
    "DroppedTokens",
    "PatchDrop",
]
