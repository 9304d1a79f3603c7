"""The large-index tier (GPU only): an operand whose element offsets pass 2**31, where 32-bit offset
arithmetic overflows. Each variant either computes correctly there or declares its limit and refuses
such operands with a clear error; this checks whichever it declares."""

import importlib
import subprocess
import sys

import numpy as np
import pytest
import torch

from gemm_fuzz import kernels
from gemm_fuzz.kernels import mutants
from gemm_fuzz.kernels.mutants import Edit
from gemm_fuzz.reference import bounds, numpy_ref, routing

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


@pytest.mark.parametrize("variant", [pytest.param(v, id=v.name) for v in kernels.variants()
                                     if v.precision == "ieee" and v.operation.plain])  # launched on (a, b, c) alone
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


# --- MoE: a slot's row of C past element 2**31 (tokens x top_k x N), and an expert's weights past it (expert
# --- index x its stride). fused_moe computes both in 64 bits; each planted bug forms one of them in 32 bits.
MOE_N, MOE_K, TOP_K = 1024, 16, 2
LAST_SAFE = 2**31 // (TOP_K * MOE_N)  # tokens whose slots' last element of C is at offset 2**31 - 1
TOKENS = LAST_SAFE + 8  # the last 8 tokens' slots start past element 2**31 of C
INT32_TOKEN_OFFSETS = Edit("    offs_token = tl.load(sorted_token_ids_ptr + offs_token_id).to(tl.int64)\n",
                           "    offs_token = tl.load(sorted_token_ids_ptr + offs_token_id)\n")
INT32_EXPERT_OFFSET = Edit("    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)\n",
                           "    expert = tl.load(expert_ids_ptr + pid_m)\n")


def _fused_moe(*edits):
    if not edits:
        return kernels.get("fused_moe")
    module = importlib.import_module("gemm_fuzz.kernels.fused_moe")
    name = "fused_moe_" + "_".join(str(len(e.new)) for e in edits)
    (variant,) = [v for v in mutants.plant(module, edits, name) if v.name == "fused_moe"]
    return variant


def _moe_launch(variant, a, b, c, ids):
    r = routing.align(ids, b.shape[0], variant.operation_in("cuda", a.dtype).block_m)
    extras = dict(sorted_token_ids=torch.tensor(r.sorted_token_ids, dtype=torch.int32, device=a.device),
                  expert_ids=torch.tensor(r.expert_ids, dtype=torch.int32, device=a.device),
                  num_tokens_post_padded=torch.tensor([r.num_tokens_post_padded], dtype=torch.int32, device=a.device),
                  topk_weights=torch.ones(ids.shape, dtype=torch.float32, device=a.device), top_k=ids.shape[1])
    variant.launch(a, b, c, **extras)
    torch.cuda.synchronize()
    return r


def _token_tier(variant, tokens: int = TOKENS):
    """C (tokens * TOP_K x 1024 fp16, 4.3 GB) pre-filled with NaN; every token to experts 0 and 1; only the last
    tokens' rows of A non-zero. Returns (right where it must be, the rest zero)."""
    g = torch.Generator().manual_seed(0)
    a = torch.zeros((tokens, MOE_K), dtype=torch.float16, device="cuda")
    a[-8:] = torch.randint(-8, 9, (8, MOE_K), generator=g).to(torch.float16).cuda()
    b = torch.randint(-8, 9, (2, MOE_K, MOE_N), generator=g).to(torch.float16).cuda()
    c = torch.full((tokens * TOP_K, MOE_N), float("nan"), dtype=torch.float16, device="cuda")
    ids = np.tile(np.arange(TOP_K), (tokens, 1))
    _moe_launch(variant, a, b, c, ids)
    want = torch.stack([a[-8:].double() @ b[e].double() for e in range(TOP_K)], dim=1).reshape(-1, MOE_N)
    tail_right = torch.equal(c[-8 * TOP_K:].double(), want.half().double())
    rest_zero = not c[:-8 * TOP_K].any().item() and not torch.isnan(c).any().item()
    return tail_right and rest_zero


def _expert_tier(variant, expert: int = 2):
    """An expert stride below 2**31 (K * N = 2**30 + 16 * K: it is passed as an int32) whose multiple by
    expert 2 passes it (B 6.4 GB fp16); one token routed to `expert` (1: its offset still below 2**31)."""
    n = 2**30 // 1024 + 16
    g = torch.Generator().manual_seed(1)
    b = torch.zeros((3, 1024, n), dtype=torch.float16, device="cuda")
    b[expert, :, -16:] = torch.randint(-4, 5, (1024, 16), generator=g).to(torch.float16).cuda()
    a = torch.randint(-4, 5, (1, 1024), generator=g).to(torch.float16).cuda()
    c = torch.full((1, n), float("nan"), dtype=torch.float16, device="cuda")
    _moe_launch(variant, a, b, c, np.array([[expert]]))
    want = (a.double() @ b[expert, :, -16:].double()).half().double()
    return torch.equal(c[:, -16:].double(), want) and not c[:, :-16].any().item()


def test_a_moe_kernel_with_64_bit_offsets_is_right_past_2_31(backend):
    assert _token_tier(_fused_moe())
    assert _expert_tier(_fused_moe())


# each planted bug: its edit, its tier, the smallest size that shows it and the largest that does not (the case
# it shrinks to, along the one dimension that matters: one token, or one expert, past the boundary)
PLANTED = {"token offsets in int32": (INT32_TOKEN_OFFSETS, _token_tier, LAST_SAFE + 1, LAST_SAFE),
           "expert offset in int32": (INT32_EXPERT_OFFSET, _expert_tier, 2, 1)}


def _planted(bug: str, size: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, __file__, bug, str(size)], capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize("bug", PLANTED)
def test_a_moe_kernel_forming_an_offset_in_32_bits_is_caught_past_2_31_and_not_before(backend, bug):
    """Wrapped offsets land before C or B, or on other rows: wrong rows, or a fault that ends the process
    (so each runs in its own: exit 1 for wrong rows, a CUDA error otherwise, 0 only if it went unseen). The
    smallest case past 2**31 shows it, and the largest below does not: the bug is the offset's width."""
    _, _, smallest, unaffected = PLANTED[bug]
    done = _planted(bug, smallest)
    assert done.returncode != 0, f"{bug}: the kernel was right past 2**31\n{done.stdout}{done.stderr}"
    print(f"{bug}: caught at {smallest} (exit {done.returncode}: "
          f"{(done.stdout + done.stderr).strip().splitlines()[-1:]})")
    below = _planted(bug, unaffected)
    assert below.returncode == 0, f"{bug}: wrong at {unaffected}, below 2**31\n{below.stdout}{below.stderr}"


if __name__ == "__main__":
    edit, tier, _, _ = PLANTED[sys.argv[1]]
    right = tier(_fused_moe(edit), int(sys.argv[2]))
    print("right" if right else "wrong rows")
    sys.exit(0 if right else 1)
