"""lime's ``lime.lime_tabular`` names: the tabular explainer, its domain mapper and the discretizers."""

from torchlime.compat.lime._domain import TableDomainMapper
from torchlime.compat.lime._explanation import Explanation
from torchlime.compat.lime._tabular import LimeTabularExplainer
from torchlime.compat.lime.discretize import (
    BaseDiscretizer,
    DecileDiscretizer,
    EntropyDiscretizer,
    QuartileDiscretizer,
    StatsDiscretizer,
)

__all__ = [
    "LimeTabularExplainer",
    "TableDomainMapper",
    "Explanation",
    "BaseDiscretizer",
    "QuartileDiscretizer",
    "DecileDiscretizer",
    "EntropyDiscretizer",
    "StatsDiscretizer",
]
