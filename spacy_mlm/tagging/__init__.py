"""The maths of sequence tagging, apart from any component: tag schemes, the
linear-chain CRF, losses, constrained decoding and span probabilities, tested on
their own."""
