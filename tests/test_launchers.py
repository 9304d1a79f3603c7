"""Every launcher refuses bad input with an error naming what was wrong and what is expected, and
writes nothing when it refuses; empty dimensions are valid. A variant with an epilogue gets right
extras beside the bad operand; a batched one, 3-D operands."""

import re

import pytest
import torch

from gemm_fuzz import kernels
from gemm_fuzz.kernels.operation import SCALE_DTYPES
from gemm_fuzz.properties.model import strategies
from gemm_fuzz.properties.model.cases import raw
from gemm_fuzz.properties.run import runner
from gemm_fuzz.reference.formats import name_of

# grouped variants take (G, K, N) weights and metadata: their refusals are tests/test_grouped.py's
VARIANTS = [pytest.param(v, id=v.name) for v in kernels.variants() if not v.operation.grouped]


def _unwritten(shape, dtype, device) -> torch.Tensor:
    """C as a refusal must leave it: NaN (float) or the most negative integer, never a value a launcher
    that zeroes or computes C before refusing would leave there."""
    fill = float("nan") if dtype.is_floating_point else torch.iinfo(dtype).min
    return torch.full(shape, fill, dtype=dtype, device=device)


def _operands(variant, device, m=4, n=6, k=5):
    """A, B and an unwritten C for the variant (batched: 2 problems; gated: B of 2N columns)."""
    dtype = next(iter(variant.dtypes))
    out = variant.dtypes[dtype][0]
    batch = (2,) if variant.operation.batched else ()
    make = (lambda *s: torch.randint(-2, 3, s).to(dtype).to(device))
    b = make(*batch, k, variant.operation.n_columns(n))
    if variant.operation.weight:  # codes as the kernel stores them (int4: two a byte along K)
        b = torch.zeros(variant.operation.b_shape(k, n), dtype=variant.operation.b_dtype, device=device)
    return make(*batch, m, k), b, _unwritten((*batch, m, n), out, device)


def _extras(variant, c, k=5) -> dict:
    """Right extras for the variant's operation (none for C = A @ B), by the keywords it takes them as
    (scales for _operands' K)."""
    op = variant.operation
    *batch, m, n = c.shape
    scales = SCALE_DTYPES[op.scale_dtype]
    make = {"bias": lambda: torch.ones(n if op.bias == "n" else m, dtype=op.bias_dtype or c.dtype, device=c.device),
            "c_in": lambda: torch.ones_like(c), "residual": lambda: torch.ones_like(c), "alpha": lambda: 1.0,
            "beta": lambda: 1.0, "pre": lambda: _unwritten((*batch, m, op.n_columns(n)), c.dtype, c.device),
            "a_scale": lambda: torch.ones(op.scale_shape("a", m, n, k), dtype=scales, device=c.device),
            "b_scale": lambda: torch.ones(op.scale_shape("b", m, n, k), dtype=scales, device=c.device),
            "b_zero": lambda: torch.zeros(op.zero_shape(n, k), dtype=scales if op.zero == "float" else torch.int32,
                                          device=c.device)}
    return {keyword: make[extra]() for extra, keyword in op.keywords().items()}


def _rank(variant, dims: str) -> str:
    """The rank the launcher asks of an operand, as its message says it (a pattern)."""
    return r"3-D \(Bt x " + dims if variant.operation.batched else r"2-D \(" + dims


def _refused(variant, a, b, c, error, pattern):
    before = raw(c).clone() if isinstance(c, torch.Tensor) else None
    extras = _extras(variant, c) if isinstance(c, torch.Tensor) and c.device.type != "meta" and c.dim() >= 2 else {}
    with pytest.raises(error, match=pattern):
        variant.launch(a, b, c, **extras)
    if before is not None and before.device.type != "meta":
        assert torch.equal(before, raw(c)), "a refused launch wrote into C"  # bit for bit: NaN != NaN


@pytest.mark.parametrize("variant", VARIANTS)
def test_refuses_wrong_ranks(variant, backend):
    a, b, c = _operands(variant, backend.device)
    _refused(variant, a[None], b, c, ValueError, _rank(variant, r"M x K\), got [34]-D with shape \(1, "))
    _refused(variant, a, b[0], c, ValueError, _rank(variant, r"K x 2?N\), got [12]-D"))  # gated: K x 2N
    _refused(variant, a, b, c[0], ValueError, _rank(variant, r"M x N\), got [12]-D"))


@pytest.mark.parametrize("variant", VARIANTS)
def test_refuses_mismatched_shapes(variant, backend):
    a, b, c = _operands(variant, backend.device)
    if variant.operation.weight:  # int4 codes two a byte along K: B has 3 rows for K = 5
        shape = re.escape("B has shape (2, 6); expected (3, 6) for A's K = 5")
        _refused(variant, a, b[..., :2, :], c, ValueError, shape)
    else:
        _refused(variant, a, b[..., :4, :], c, ValueError, r"B has 4 rows but A has 5 columns \(K\)")
    expected = "(Bt, M, N) = (2, 4, 6)" if variant.operation.batched else "(M, N) = (4, 6)"
    _refused(variant, a, b, c[..., :3, :], ValueError, re.escape(f"C has shape {tuple(c[..., :3, :].shape)}; "
                                                                 f"expected {expected}"))


@pytest.mark.parametrize("variant", VARIANTS)
def test_refuses_wrong_types_and_dtypes(variant, backend):
    a, b, c = _operands(variant, backend.device)
    _refused(variant, a.tolist(), b, c, TypeError, "A must be a torch.Tensor, got list")
    _refused(variant, a, b, None, TypeError, "C must be a torch.Tensor, got NoneType")
    _refused(variant, a.double(), b.double(), c, TypeError, f"A has dtype float64; variant '{variant.name}' takes")
    other = next((d for d in variant.dtypes if d != a.dtype), torch.float64)
    shared = "B has dtype .* but A has .*: A and B must share one dtype"
    if variant.operation.weight:  # B holds codes, stored as the operation declares
        shared = f"B has dtype .*; variant '{variant.name}' takes {variant.operation.weight} codes stored as"
    _refused(variant, a, b.to(other), c, TypeError, shared)
    _refused(variant, a, b, c.to(torch.int16), TypeError, r"C has dtype int16; for .* inputs variant .* writes")


@pytest.mark.parametrize("variant", VARIANTS)
def test_refuses_meta_tensors(variant, backend):
    a, b, c = _operands(variant, backend.device)
    _refused(variant, a.to("meta"), b.to("meta"), c, ValueError, r"A is a meta tensor \(a shape without data\)")
    _refused(variant, a, b.to("meta"), c, ValueError, r"B is a meta tensor")
    _refused(variant, a, b, c.to("meta"), ValueError, r"C is a meta tensor")


@pytest.mark.parametrize("variant", VARIANTS)
def test_refuses_operands_that_require_grad(variant, backend):
    a, b, c = _operands(variant, backend.device)
    grads = lambda t: (t if t.is_floating_point() else t.half()).clone().requires_grad_()  # noqa: E731 int8: as fp16
    grad = r"{} requires grad: the kernels write into C as torch's out= functions do.*pass {}.detach\(\)"
    _refused(variant, grads(a), b, c, ValueError, grad.format("A", "A"))
    _refused(variant, a, grads(b), c, ValueError, grad.format("B", "B"))
    _refused(variant, a, b, grads(c), ValueError, grad.format("C", "C"))


@pytest.mark.gpu
@pytest.mark.parametrize("variant", VARIANTS)
def test_refuses_tensors_on_different_devices(variant, backend):
    a, b, c = _operands(variant, backend.device)
    _refused(variant, a, b.cpu(), c, ValueError, r"A, B, C must be on one device; got A on cuda.*, B on cpu")
    _refused(variant, a, b, c.cpu(), ValueError, r"A, B, C must be on one device; got .*, C on cpu")


@pytest.mark.parametrize("variant", VARIANTS)
def test_refuses_an_output_that_aliases_an_input_or_itself(variant, backend):
    a, b, c = _operands(variant, backend.device, m=6, n=5, k=6)
    out_dtype = variant.dtypes[a.dtype][0]
    if out_dtype == a.dtype:
        _refused(variant, a, b, a[..., :5], ValueError, "C overlaps A in memory")
        if not variant.operation.weight:  # weight-only codes: no C of C's dtype is a view of B
            _refused(variant, a, b, b[..., :6, :5], ValueError, "C overlaps B in memory")
    row = _unwritten((*c.shape[:-2], 1, 5), out_dtype, backend.device)
    _refused(variant, a, b, row.expand(c.shape), ValueError, r"C has strides \((\d+, )?0, 1\) so two of its elements "
             "share memory")
    if variant.operation.has_c_in:
        extras = {**_extras(variant, c), variant.operation.keywords()["c_in"]: c}
        with pytest.raises(ValueError, match="C overlaps c_in in memory"):
            variant.launch(a, b, c, **extras)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", VARIANTS)
def test_refuses_cpu_tensors_on_the_cuda_backend(variant, backend):
    a, b, c = _operands(variant, "cpu")
    _refused(variant, a, b, c, ValueError, "on cpu but the kernels are compiled for CUDA")


def test_matmul_allocates_the_output_and_names_unknown_variants(backend):
    a = torch.ones(3, 4, dtype=torch.float16, device=backend.device)
    b = torch.ones(4, 2, dtype=torch.float16, device=backend.device)
    c = kernels.matmul(a, b)
    assert c.shape == (3, 2) and c.dtype == torch.float16 and torch.all(c == 4)
    out = torch.empty(3, 2, dtype=torch.float16, device=backend.device)
    assert kernels.matmul(a, b, out=out) is out and torch.all(out == 4)
    with pytest.raises(KeyError, match="no variant named 'nope'; registered variants: .*tiled"):
        kernels.matmul(a, b, variant="nope")
    with pytest.raises(TypeError, match="A has dtype float64"):
        kernels.matmul(a.double(), b.double())


def test_matmul_refuses_meta_and_autograd_inputs_before_allocating(backend):
    a = torch.ones(3, 4, dtype=torch.float16, device=backend.device)
    b = torch.ones(4, 2, dtype=torch.float16, device=backend.device)
    with pytest.raises(ValueError, match="A is a meta tensor"):
        kernels.matmul(a.to("meta"), b)
    with pytest.raises(ValueError, match="B is a meta tensor"):
        kernels.matmul(a, b.to("meta"))
    with pytest.raises(ValueError, match=r"A requires grad.*autograd does not follow"):
        kernels.matmul(a.clone().requires_grad_(), b)
    with pytest.raises(ValueError, match=r"C requires grad"):
        kernels.matmul(a, b, out=torch.empty(3, 2, dtype=torch.float16, device=backend.device, requires_grad=True))


def test_matmul_checks_a_then_b_before_allocating_c(backend, monkeypatch):
    """A bad A (then B) is named before C is allocated: with A's M huge, allocating C first would fail
    on a C the caller never passed (or take all memory)."""
    huge = 2**40  # rows of an expanded A (stride 0): no memory, but C would need 2**40 x N elements
    a = torch.ones(1, 4, dtype=torch.float16, device=backend.device).expand(huge, 4)
    b = torch.ones(4, 2, dtype=torch.float16, device=backend.device)
    allocated = []
    monkeypatch.setattr(torch, "empty", lambda *args, **kw: allocated.append(args) or pytest.fail("C allocated"))
    with pytest.raises(ValueError, match=r"A has strides \(0, 1\); variant 'swizzle2d' needs every stride positive"):
        kernels.matmul(a, b, variant="swizzle2d")
    with pytest.raises(ValueError, match=rf"A has {huge} rows \(M\) and B 2 columns \(N\): C, M x N, would reach "
                                         rf"element offset {2 * huge - 1}, past 2147483647.*'tiled'"):
        kernels.matmul(a, b, variant="tiled")
    with pytest.raises(ValueError, match=r"B has 3 rows but A has 4 columns"):
        kernels.matmul(a, b[:3], variant="tiled")
    with pytest.raises(TypeError, match="A must be a torch.Tensor, got list"):
        kernels.matmul([[1.0]], b[:3].tolist())
    assert not allocated


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("m,n,k", [(0, 5, 7), (5, 0, 7), (5, 7, 0), (0, 0, 0), (1, 1, 0)])
def test_empty_dimensions_are_valid(variant, backend, m, n, k):
    """K = 0 gives zeros (every element written); M or N = 0 writes nothing at all."""
    if not variant.runs_on(backend.name):
        pytest.skip(f"{variant.name} needs a CUDA GPU; the backend is {backend.name}")
    case = strategies.simplest_case(variant, m, n, k, name_of(next(iter(variant.dtypes))))
    observed = runner.check(variant, case, backend)  # raises on anything unwritten or wrong
    assert observed.exact or variant.operation.activation  # act(0 + beta * C_in + bias) is rounded
