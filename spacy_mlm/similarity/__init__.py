"""Contextual word-sense similarity: fitted vector transformations, sense
inventories and pair scoring. Pure numpy; the spaCy component lives in
`spacy_mlm.pipeline.similarity`."""
from .scoring import accuracy_at, cosine_rows, tune_threshold
from .senses import SenseAssignment, SenseInventory
from .transforms import (
    MeanCenter,
    RemoveTopComponents,
    Standardize,
    TransformChain,
    Whiten,
    build_vector_transform_v1,
    make_transform_chain,
)

__all__ = [
    "accuracy_at", "cosine_rows", "tune_threshold", "SenseAssignment", "SenseInventory",
    "MeanCenter", "RemoveTopComponents", "Standardize", "TransformChain", "Whiten",
    "build_vector_transform_v1", "make_transform_chain",
]
