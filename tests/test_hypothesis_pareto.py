"""properties/run/hypothesis_pareto.py: Hypothesis's shrink-order key computed once per example, every
comparison unchanged."""

import hypothesis.core
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis import target as climb
from hypothesis.database import InMemoryExampleDatabase
from hypothesis.internal.conjecture import engine, pareto, shrinker

from gemm_fuzz.properties.run import hypothesis_pareto, runner  # noqa: F401  (runner installs it)


def test_the_engine_and_the_pareto_front_use_the_memoized_key():
    assert hypothesis_pareto.install()
    assert getattr(shrinker.sort_key, "memoized", False)
    assert pareto.sort_key is shrinker.sort_key and engine.sort_key is shrinker.sort_key


def _search(monkeypatch, key) -> tuple[list, int]:
    """A seeded targeted search with a database (a campaign's shape) with `key` as Hypothesis's sort_key:
    the examples it ran, and how many choices it converted to their index (the key's cost)."""
    for module in (shrinker, pareto, engine):
        monkeypatch.setattr(module, "sort_key", key)
    converted = [0]
    to_index = shrinker.choice_to_index

    def counting(*args, **kwargs):
        converted[0] += 1
        return to_index(*args, **kwargs)

    monkeypatch.setattr(shrinker, "choice_to_index", counting)
    ran = []

    @settings(max_examples=200, database=InMemoryExampleDatabase(), deadline=None)
    @given(st.lists(st.integers(0, 1000), min_size=3, max_size=12), st.integers(0, 50))
    def search(xs, y):
        ran.append((tuple(xs), y))
        climb(float(sum(xs) % 97 + y), label="score")

    monkeypatch.setattr(hypothesis.core, "global_force_seed", 7)  # both searches draw the same examples
    search._hypothesis_internal_database_key = b"pareto"  # a forced seed alone leaves no database key, so no front
    search()
    return ran, converted[0]


def test_the_memo_runs_the_same_search_for_a_fraction_of_the_keys(monkeypatch):
    memo = shrinker.sort_key
    plain_ran, plain_cost = _search(monkeypatch, memo.original)
    memo_ran, memo_cost = _search(monkeypatch, memo)
    assert memo_ran == plain_ran  # every comparison, and so the whole search, is what it was
    assert memo_cost * 3 < plain_cost, (memo_cost, plain_cost)
