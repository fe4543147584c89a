"""srsly's msgpack codec for `DocEncoding` (models/encoding.py).

A Doc's encoding travels in `doc.to_bytes()`, `DocBin(store_user_data=True)`
and `nlp.pipe(n_process=N)` as msgpack. The process that reads it may never
have imported spacy_mlm (a script that only loads a DocBin), so the codec is
registered through srsly's entry points (setup.py, `srsly_msgpack_encoders` /
`srsly_msgpack_decoders`). srsly loads those in every process of every spaCy
user, each time it makes a packer or unpacker, so this module imports only
srsly (loaded already when srsly loads it): the `DocEncoding` class (and torch
with it) is imported only when an encoding is actually met in the data. The
decorators register the same functions where the module is imported first."""
from typing import Any

import srsly

# the key that marks a DocEncoding in msgpack data
MSGPACK_KEY = "__spacy_mlm_doc_encoding__"
_DOC_ENCODING = ("spacy_mlm.models.encoding", "DocEncoding")


@srsly.msgpack_encoders("spacy_mlm_doc_encoding")
def encode_doc_encoding(obj: Any, chain=None) -> Any:
    """srsly msgpack encoder: a `DocEncoding` as `{MSGPACK_KEY: to_dict()}`.
    Recognised by its class's module and name: a DocEncoding exists only where
    models/encoding.py is already imported."""
    if (type(obj).__module__, type(obj).__name__) == _DOC_ENCODING:
        return {MSGPACK_KEY: obj.to_dict()}
    return obj if chain is None else chain(obj)


@srsly.msgpack_decoders("spacy_mlm_doc_encoding")
def decode_doc_encoding(obj: Any, chain=None) -> Any:
    """srsly msgpack decoder of `encode_doc_encoding`'s output."""
    if isinstance(obj, dict) and MSGPACK_KEY in obj:
        from .encoding import DocEncoding

        return DocEncoding.from_dict(obj[MSGPACK_KEY])
    return obj if chain is None else chain(obj)
