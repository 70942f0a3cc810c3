"""Drop-in explainers with a peer library's API on torchlime's engine (``torchlime.compat.captum``)."""
