"""The package's version, at the bottom of the layers: any module may read it without importing the package's face
(``eddi_rag/__init__.py``, which names the Runtime)."""

__version__ = "0.1.0"
