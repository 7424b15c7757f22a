"""The models and their numeric kernels, apart from the data path: the block a model reads
(block.py), GraphSAGE (sage.py), the R-GCN (rgcn.py), the R-GAT (rgat.py), link prediction's model, scorers and
measures (link.py), the product engines (matmul.py) and the count of a step's products
(roofline.py)."""

from fastsample.nn.block import Block
from fastsample.nn.link import LinkModel
from fastsample.nn.rgat import RGAT
from fastsample.nn.rgcn import RGCN
from fastsample.nn.sage import GraphSAGE

__all__ = ["Block", "GraphSAGE", "LinkModel", "RGAT", "RGCN"]
