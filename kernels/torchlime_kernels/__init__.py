"""torchlime's Triton kernels and their torch references, shipped as ``torchlime.kernels``.

``blend`` (the fused mask expansion and baseline blend), ``slic`` (SLIC's assignment and centre
update), ``hash_words`` (the counter-based hash words every mask and random fill start from),
``fit`` (the fit's epilogue: centred normal equations, the fit's summary, the quality flags),
``boxes`` (the detector target's ranking of its targets and D-RISE matching of every row), ``reference``,
``reference_hash``, ``reference_fit`` and ``reference_boxes`` (the torch references, with the same
signatures). Only ``torchlime._backend`` imports them.
"""
