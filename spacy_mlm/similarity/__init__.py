"""Contextual word-sense similarity: which hidden states a token vector comes
from (`layers`), fitted vector transformations, sense inventories, the
Doc/Span/Token hooks over `doc._.mlm_vectors` (`hooks`) and Word-in-Context
evaluation. The spaCy component is `spacy_mlm.pipeline.vectors`
("mlm_vectors"), the pipelines built around it `spacy_mlm.vectors_pipeline`
(above the components); pair scoring is `spacy_mlm.scoring.similarity`."""
from ..scoring.similarity import accuracy_at, tune_threshold
from ..util.vectors import cosine_rows
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
