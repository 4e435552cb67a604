"""The real embedder, counting the passages it embeds (tests of what gets embedded, and how often)."""


class CountingEmbedder:
    def __init__(self, embedder):
        self._e, self.passages = embedder, 0

    def __getattr__(self, name):
        return getattr(self._e, name)

    def embed_passages(self, texts):
        self.passages += len(texts)
        return self._e.embed_passages(texts)
