"""The large-index tier (GPU only): an operand whose element offsets pass 2**31, where 32-bit offset
arithmetic overflows. Each variant either computes correctly there or declares its limit and refuses
such operands with a clear error; this checks whichever it declares."""

import pytest
import torch

from gemm_fuzz import kernels
from gemm_fuzz.reference import bounds, numpy_ref

pytestmark = [pytest.mark.large, pytest.mark.gpu]

K, N, TAIL = 64, 16, 17
ROWS = 2**31 // K + TAIL  # the last rows of A start past element offset 2**31


@pytest.fixture(scope="module")
def huge(backend):
    """A (ROWS x 64 fp16, 4.3 GB) zero but for its last rows, and B."""
    a = torch.zeros((ROWS, K), dtype=torch.float16, device=backend.device)
    g = torch.Generator().manual_seed(0)
    a[-TAIL:] = torch.randint(-8, 9, (TAIL, K), generator=g).to(torch.float16).to(backend.device)
    b = torch.randint(-8, 9, (K, N), generator=g).to(torch.float16).to(backend.device)
    return a, b


@pytest.mark.parametrize("variant", [pytest.param(v, id=v.name) for v in kernels.variants() if v.precision == "ieee"])
def test_offsets_past_2_31_are_computed_or_refused(variant, huge):
    a, b = huge
    c = torch.full((ROWS, N), float("nan"), dtype=torch.float16, device=a.device)
    limit = variant.requirements.max_offset
    if limit is not None:
        with pytest.raises(ValueError, match=rf"A reaches element offset {ROWS * K - 1}, past {limit}"):
            variant.launch(a, b, c)
        assert torch.isnan(c).all()  # refused before anything was written
        return
    variant.launch(a, b, c)
    torch.cuda.synchronize()
    product = numpy_ref.product(a[-TAIL:], b)  # small integers: exact
    assert bounds.exact_expected(product, bounds.arithmetic("fp16")).all()
    assert torch.equal(c[-TAIL:].cpu().double(), torch.from_numpy(product.value).to(torch.float16).double())
    assert not c[:-TAIL].any() and not torch.isnan(c).any()
