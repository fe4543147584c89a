"""`python -m spacy_mlm ...`: the command line (`spacy_mlm.cli`) without the
console script on PATH."""
from .cli import app

if __name__ == "__main__":
    app()
