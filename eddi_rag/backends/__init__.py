"""Which engines and providers exist and how one is built: the registry of store backends,
embedding providers and answerers (``registry``) and the factories that build a store or an embedding
provider from a configuration (``factories``)."""
