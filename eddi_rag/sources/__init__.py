"""Sources a knowledge base is kept in sync with: the protocol and its vocabulary (``base``), one module per kind of
source (``connectors/``), what the sync engine keeps of them (``ledger``, ``runs``, ``files``), and the HTTP helpers the
connectors share (``fetching``, ``saas``). The engine itself is ``verbs.sources``."""
