"""lime's ``lime.lime_text`` names: the text explainer, the indexed texts and the text domain mapper."""

from torchlime.compat.lime._domain import TextDomainMapper
from torchlime.compat.lime._explanation import Explanation
from torchlime.compat.lime._indexed import IndexedCharacters, IndexedString
from torchlime.compat.lime._text import LimeTextExplainer

__all__ = ["LimeTextExplainer", "IndexedString", "IndexedCharacters", "TextDomainMapper", "Explanation"]
