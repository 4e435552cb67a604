"""The index in parts: document store, vector index, lexical index, indexer; ``Library`` puts them together."""
from .indexer import Indexer, Progress
from .library import Library
from .store import DocInfo, DocumentStore

__all__ = ["DocInfo", "DocumentStore", "Indexer", "Library", "Progress"]
