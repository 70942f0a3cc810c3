"""Stage 3: what hidden features become (``fills``), the fused blend of a chunk of rows (``blend``),
and the record of both kept with every explanation so metrics can hide features again (``record``)."""

from torchlime.stages.perturb import blend, fills, record

__all__ = ["fills", "blend", "record"]
