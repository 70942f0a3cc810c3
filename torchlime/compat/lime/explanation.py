"""lime's ``lime.explanation`` names: the explanation and the domain mapper it names features with."""

from torchlime.compat.lime._domain import DomainMapper
from torchlime.compat.lime._explanation import Explanation

__all__ = ["Explanation", "DomainMapper"]
