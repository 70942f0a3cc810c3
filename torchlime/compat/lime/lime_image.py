"""lime's ``lime.lime_image`` names: the image explainer and its explanation."""

from torchlime.compat.lime._explanation import ImageExplanation
from torchlime.compat.lime._image import LimeImageExplainer

__all__ = ["LimeImageExplainer", "ImageExplanation"]
