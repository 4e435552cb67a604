"""The real embedder, counting the passages it embeds (tests of what gets embedded, and how often)."""
import time


class CountingEmbedder:
    """Counts passages (``passages``) and calls (``calls``); ``delay`` seconds more for every call."""

    def __init__(self, embedder, delay: float = 0.0):
        self._e, self.passages, self.calls, self.delay = embedder, 0, 0, delay

    def __getattr__(self, name):
        return getattr(self._e, name)

    def embed_passages(self, texts):
        self.passages += len(texts)
        self.calls += 1
        if self.delay:
            time.sleep(self.delay)
        return self._e.embed_passages(texts)
