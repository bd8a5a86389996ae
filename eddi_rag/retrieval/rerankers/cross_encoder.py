"""A local cross-encoder: an ONNX model (inputs ``input_ids``, ``attention_mask`` and, when it takes
them, ``token_type_ids``; output logits ``[batch, 1]``, or ``[batch, 2]`` whose last column is
"relevant") and its ``tokenizer.json``, both by path, run on onnxruntime. Each (query, document)
pair is encoded together, truncated at ``maxLength`` tokens, padded to the longest in the batch."""

from __future__ import annotations

from pathlib import Path

import numpy as np


class CrossEncoderReranker:
    PARAMETERS = ("modelPath", "tokenizerPath", "maxLength", "batchSize")
    name = "cross-encoder"

    def __init__(self, modelPath: str | None = None, tokenizerPath: str | None = None, maxLength: int = 512,
                 batchSize: int = 16):
        import onnxruntime
        from tokenizers import Tokenizer

        for key, value in (("modelPath", modelPath), ("tokenizerPath", tokenizerPath)):
            if not value:
                raise ValueError(f"rerankerParameters.{key} is required for reranker 'cross-encoder'")
            if not Path(value).is_file():
                raise ValueError(f"rerankerParameters.{key}: no file at {value}")
        self.tokenizer = Tokenizer.from_file(str(tokenizerPath))
        self.tokenizer.enable_truncation(int(maxLength))
        self.tokenizer.enable_padding()
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        self.session = onnxruntime.InferenceSession(str(modelPath), options, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.batch = int(batchSize)

    def scores(self, query: str, documents: list[str]) -> list[float]:
        out: list[float] = []
        for start in range(0, len(documents), self.batch):
            encodings = self.tokenizer.encode_batch([(query, d) for d in documents[start:start + self.batch]])
            feed = {"input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
                    "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64)}
            if "token_type_ids" in self.inputs:
                feed["token_type_ids"] = np.array([e.type_ids for e in encodings], dtype=np.int64)
            logits = np.asarray(self.session.run(None, {k: v for k, v in feed.items() if k in self.inputs})[0])
            logits = logits.reshape(len(encodings), -1)
            out += [float(x) for x in logits[:, -1]]
        return out
