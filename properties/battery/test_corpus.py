"""Past failures are replayed first (properties/checks/replay.py): every repro script in the repro
directory (--gemm-repros) of a kernel under test in this run must now pass, replayed the way it was
found. A script whose case the kernel's contract no longer admits, or whose dtype this run does not
select, is skipped with the reason; one that passes now is named at the end of the run."""

from gemm_fuzz.properties import checks

PASSED = "gemm_replay_passed"  # the user property a replay that passes leaves on its report


def test_replays_a_past_failure(corpus_case, gemm, request):
    gemm.check(checks.REPLAY, corpus_case)
    request.node.user_properties.append((PASSED, str(corpus_case.path)))
