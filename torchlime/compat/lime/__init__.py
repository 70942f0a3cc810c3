"""lime's explainers on torchlime's engine: switching is one import line.

``from torchlime.compat.lime import LimeTextExplainer, LimeImageExplainer, LimeTabularExplainer``
takes lime's constructors and ``explain_instance`` arguments (numpy images and a ``classifier_fn``
over numpy batches, raw strings with ``bow`` / ``char_level`` / ``mask_string`` /
``split_expression``, tabular ``training_data`` dense or scipy sparse, ``training_data_stats``,
discretizer names or lime's discretizer objects, ``random_state``) and returns explanations with
lime's accessors (``as_list``, ``as_map``, ``local_exp``, ``intercept``, ``score``, ``top_labels``,
``get_image_and_mask``, ``as_pyplot_figure``, ``as_html``, ``show_in_notebook``). Sampling, the model
calls (in chunks), the kernel, the feature selection and the fit are torchlime's batched ones.

lime's other public names are here too, and under lime's module paths (``discretize``,
``lime_text``, ``lime_tabular``, ``lime_image``, ``explanation``, ``submodular_pick``,
``wrappers.scikit_image``): the discretizers, ``IndexedString`` / ``IndexedCharacters``, the domain
mappers, ``SubmodularPick`` (SP-LIME) and ``SegmentationAlgorithm``.
"""

from torchlime.compat.lime._domain import DomainMapper, TableDomainMapper, TextDomainMapper
from torchlime.compat.lime._explanation import Explanation, ImageExplanation
from torchlime.compat.lime._image import LimeImageExplainer
from torchlime.compat.lime._indexed import IndexedCharacters, IndexedString
from torchlime.compat.lime._tabular import LimeTabularExplainer
from torchlime.compat.lime._text import LimeTextExplainer
from torchlime.compat.lime.discretize import (
    BaseDiscretizer,
    DecileDiscretizer,
    EntropyDiscretizer,
    QuartileDiscretizer,
    StatsDiscretizer,
)
from torchlime.compat.lime.submodular_pick import SubmodularPick
from torchlime.compat.lime.wrappers.scikit_image import BaseWrapper, SegmentationAlgorithm

__all__ = [
    "LimeTextExplainer",
    "LimeImageExplainer",
    "LimeTabularExplainer",
    "Explanation",
    "ImageExplanation",
    "DomainMapper",
    "TextDomainMapper",
    "TableDomainMapper",
    "IndexedString",
    "IndexedCharacters",
    "BaseDiscretizer",
    "QuartileDiscretizer",
    "DecileDiscretizer",
    "EntropyDiscretizer",
    "StatsDiscretizer",
    "BaseWrapper",
    "SegmentationAlgorithm",
    "SubmodularPick",
]
