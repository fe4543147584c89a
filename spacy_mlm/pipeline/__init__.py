"""The spaCy pipeline components, one factory per module, kept thin: settings,
labels, gold and serialization here, the models below (`models/`) and the maths
further down."""
