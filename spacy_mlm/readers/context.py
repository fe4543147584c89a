"""Training examples for an encoder that reads sentences in their document.

`spacy train` batches examples, and a batch of whole documents is a few large,
correlated steps where a batch of sentences is many small ones from many
documents. With `context = "document"` the training corpus is whole documents
(`convert-conll --n-sents 0`) and this augmenter turns each into one example
per sentence that carries the document's text around it (`doc._.mlm_context`),
so batches stay batches of sentences (16 by default, by length as before) while
the encoder reads each one in its document, as it will at prediction time on
whole documents.
"""
from typing import Callable, Iterator

from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example
from spacy.util import registry

from ..tokenization.context import CONTEXT_ATTR, check_context, install_context_extension, sentences_in_context


@registry.augmenters("spacy_mlm.sentences_in_context.v1")
def create_sentences_in_context_v1(
    context: str = "document", max_chars: int = 4000
) -> Callable[[Language, Example], Iterator[Example]]:
    """With context = "document", each example becomes one example per sentence of
    its reference (`token.is_sent_start`; a Doc without them is one sentence),
    tokenized as the reference, whose predicted Doc carries the text before and
    after it (up to `max_chars` a side, cut at whitespace: enough for 64 pieces
    many times over). With "none" examples pass unchanged, so one config serves
    both settings."""
    check_context(context, 0)
    install_context_extension()

    def augment(nlp: Language, example: Example) -> Iterator[Example]:
        if context == "none":
            yield example
            return
        for sentence, before, after in sentences_in_context(example.reference, max_chars):
            words = [t.text for t in sentence]
            predicted = Doc(nlp.vocab, words=words, spaces=[bool(t.whitespace_) for t in sentence])
            predicted._.set(CONTEXT_ATTR, (before, after))
            yield Example(predicted, sentence.as_doc())

    return augment
