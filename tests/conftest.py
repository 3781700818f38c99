"""Test set-up. Without CUDA, Triton kernels run under its interpreter: TRITON_INTERPRET
must be set before triton is first imported, so it is set here, at collection time."""
import os

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402

HAS_CUDA = torch.cuda.is_available()
INTERPRETING = os.environ.get("TRITON_INTERPRET") == "1"


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords and not HAS_CUDA:
            item.add_marker(skip_gpu)


@pytest.fixture
def dev():
    """The torch device the kernels under test run on: the GPU when present, else the CPU."""
    return "cuda" if HAS_CUDA else "cpu"
