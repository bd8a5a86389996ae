"""Small records the state database keeps beside knowledge bases: collections of pre-embedded
documents (``vector_collections``), answer feedback (``feedback``) and test questions (``questions``)."""
