"""Stage 3: the perturbation.

What hidden features become (``fills``), the fused blend of a chunk of rows (``blend``), models of
several inputs as one flat carrier (``packing``), and the record of the perturbation kept with every
explanation so metrics can hide features again (``record``).
"""

from torchlime.stages.perturb import blend, fills, packing, record

__all__ = ["fills", "blend", "packing", "record"]
