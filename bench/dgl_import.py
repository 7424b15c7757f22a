"""Import DGL in its own venv (bench/README.md, "DGL baselines"): the one home of the shims
the old wheels need on torch 2.13. Keep this file free of fastsample imports."""

import os
import sys
import types
import warnings


def import_dgl():
    os.environ.setdefault("DGLBACKEND", "pytorch")
    warnings.filterwarnings("ignore")
    sys.modules.setdefault("dgl.graphbolt", types.ModuleType("dgl.graphbolt"))  # no build for this torch
    import dgl

    return dgl
