"""Amazon Bedrock embeddings (Titan by default) through langchain-aws."""

from __future__ import annotations

from typing import Any

from botocore.config import Config
from langchain_aws import BedrockEmbeddings

from eddi_rag.common.parameters import alias
from eddi_rag.embeddings.base import MAX_RETRIES, EmbeddingProvider

DEFAULT_MODEL = "amazon.titan-embed-text-v2:0"
DEFAULT_REGION = "us-east-1"


def build(params: dict[str, Any]):
    kwargs: dict[str, Any] = {
        "model_id": params.get("model", DEFAULT_MODEL),
        "region_name": params.get("region", DEFAULT_REGION),
        "config": Config(retries={"max_attempts": 1, "mode": "standard"}),  # retries are ours
    }
    if params.get("accessKeyId"):
        kwargs["aws_access_key_id"] = params["accessKeyId"]
        kwargs["aws_secret_access_key"] = params.get("secretAccessKey")
        kwargs["aws_session_token"] = params.get("sessionToken")
    if params.get("endpointUrl"):
        kwargs["endpoint_url"] = params["endpointUrl"]
    if params.get("dimensions"):
        kwargs["dimensions"] = int(params["dimensions"])
    return BedrockEmbeddings(**kwargs)


PROVIDER = EmbeddingProvider(
    max_tokens=8192,
    name="bedrock",
    build=build,
    default_model=DEFAULT_MODEL,
    batch_size=100,  # texts per embed_documents call; Titan takes one text per request
    parameters={
        "model": {"type": "string", "default": DEFAULT_MODEL},
        "modelName": alias("model"),
        "region": {"type": "string", "default": DEFAULT_REGION},
        "accessKeyId": {"type": "string", "description": "Default: the AWS credential chain."},
        "secretAccessKey": {"type": "string"},
        "sessionToken": {"type": "string"},
        "endpointUrl": {"type": "string"},
        "dimensions": {"type": "integer", "enum": [256, 512, 1024]},
        **MAX_RETRIES,
    },
)
