"""persistent's scheduling configurations: every configuration the launcher lists computes the product
within its bound, through tensor descriptors (row- and column-major operands) and through pointers
(operands TMA cannot address); a malformed configuration is refused before anything is written."""

import dataclasses

import pytest
import torch

from gemm_fuzz import kernels
from gemm_fuzz.kernels import persistent
from gemm_fuzz.properties.model.cases import GemmCase, Layout
from gemm_fuzz.properties.run import runner
from gemm_fuzz.reference.formats import by_name, name_of


def _aligned(order: str, rows: int, cols: int) -> Layout:
    """A row- or column-major layout whose leading dimension is padded to a multiple of 16 elements,
    so that every dtype's rows start 16-byte aligned (what TMA needs)."""
    inner = cols if order == "row" else rows
    return Layout(order, pad=-inner % 16)


def _cases(m: int, n: int, k: int, dtype: str) -> list[GemmCase]:
    """Four cases of ragged tiles: TMA loads and stores of row-major operands (n a multiple of 16, so
    C's rows are 16-byte multiples), of a column-major B (K-major: a weight stored N x K), of
    column-major operands (m a multiple of 16 there), and operands TMA cannot take (a strided A, a
    misaligned B, C's rows not 16-byte multiples)."""
    out = name_of(kernels.get("persistent").dtypes[by_name(dtype).dtype][0])
    n16, m16 = n + -n % 16, m + -m % 16
    return [
        GemmCase(m, n16, k, dtype, out, _aligned("row", m, k), _aligned("row", k, n16), _aligned("row", m, n16),
                 profile="normal"),
        GemmCase(m, n16, k, dtype, out, _aligned("row", m, k), _aligned("col", k, n16), _aligned("row", m, n16),
                 profile="normal", seed=1),
        GemmCase(m16, n16, k, dtype, out, _aligned("col", m16, k), _aligned("col", k, n16),
                 _aligned("col", m16, n16), profile="normal", seed=2),
        GemmCase(m, n, k, dtype, out, Layout(step=2), Layout(offset=1), Layout(pad=3), profile="normal", seed=3),
    ]


def _recording(variant_name: str, launched: list):
    """The variant, noting every configuration its launcher is given."""
    variant = kernels.get(variant_name)

    def launch(a, b, c, config=None):
        launched.append(config)
        variant.launch(a, b, c, config=config)

    return dataclasses.replace(variant, launch=launch)


def _check_all(variant_name, config, dtype, shape, backend):
    """Every case in `config`, named by the case as the strategies name it; the launcher must be given it."""
    launched = []
    for case in _cases(*shape, dtype):
        runner.check(_recording(variant_name, launched), dataclasses.replace(case, config=tuple(config.items())),
                     backend)
    assert launched and all(c == config for c in launched), f"asked for {config}, launched {launched}"


# 16x32 tiles on 37 x 48: 6 tiles over 3 programs, so each program runs its tile loop twice
CPU_SHAPE = (37, 45, 33)
# 128x256 tiles on 1153 x 4112: 170 tiles over the H100's 132 programs
GPU_SHAPE = (1153, 4100, 96)
NARROW = ("fp16", "fp8e4m3", "int8")  # 16-bit operands, 8-bit ones (transposed for wgmma), exact integers


@pytest.mark.parametrize("dtype", ["fp16", "fp32", "int8"])
@pytest.mark.parametrize("index", range(len(persistent.CPU_CONFIGS)))
def test_each_interpreter_configuration_is_right(index, dtype, backend):
    if not backend.interpreted:
        pytest.skip("the interpreter's configurations; the GPU's are checked by the gpu tests")
    _check_all("persistent", persistent.CPU_CONFIGS[index], dtype, CPU_SHAPE, backend)


def test_the_tf32_variant_takes_configurations(backend):
    config = kernels.get("persistent").configs_for(backend.device.type, torch.float32)[-1]
    _check_all("persistent_tf32", config, "fp32", CPU_SHAPE if backend.interpreted else GPU_SHAPE, backend)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", NARROW)
@pytest.mark.parametrize("index", range(len(persistent.GPU_CONFIGS)))
def test_each_gpu_configuration_is_right(index, dtype, backend):
    _check_all("persistent", persistent.GPU_CONFIGS[index], dtype, GPU_SHAPE, backend)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["persistent", "persistent_tf32"])
@pytest.mark.parametrize("index", range(len(persistent.GPU_FP32_CONFIGS)))
def test_each_gpu_fp32_configuration_is_right(index, variant, backend):
    _check_all(variant, persistent.GPU_FP32_CONFIGS[index], "fp32", GPU_SHAPE, backend)


@pytest.mark.parametrize("change,message", [
    ({"BM": 24}, r"config\['BM'\] must be a power of two >= 16"),
    ({"num_programs": 0}, r"config\['num_programs'\] must be None \(the SM count\) or a positive int"),
    ({"GROUP_M": 0}, r"config\['GROUP_M'\] must be a positive int"),
    ({"unknown": 1}, "config must be a dict with exactly the keys BM, BN, BK"),
    ({"WARP_SPECIALIZE": True, "FLATTEN": True}, r"config\['WARP_SPECIALIZE'\] needs FLATTEN=False"),
])
def test_a_malformed_configuration_is_refused(change, message, backend):
    config = {**kernels.get("persistent").configs_for(backend.device.type, torch.float16)[0], **change}
    a = torch.ones(4, 5, dtype=torch.float16, device=backend.device)
    b = torch.ones(5, 6, dtype=torch.float16, device=backend.device)
    c = torch.full((4, 6), float("nan"), dtype=torch.float16, device=backend.device)  # zeroing or computing C shows
    before = c.view(torch.int16).clone()
    with pytest.raises(ValueError, match=message):
        kernels.get("persistent").launch(a, b, c, config=config)
    assert torch.equal(c.view(torch.int16), before), "a refused launch wrote into C"  # bit for bit: NaN != NaN
