"""DistEmbedding initializer for train.py. In its own module because DGL pickles the
init function to the graph servers, which must import it by name (server.py's directory)."""
import torch


def normal_init(shape, dtype):
    """N(0, 1) rows, as fastsample's learnable embeddings (fastsample/distributed/embedding.py)."""
    return torch.randn(shape, dtype=dtype)
