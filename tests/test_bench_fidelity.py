"""benchmarks/fidelity.py builds its dense item sets as its docstring states."""

from __future__ import annotations

import pytest
from benchmarks.fidelity import DATA, _key, sentence_sets


@pytest.mark.parametrize("name", ["tuning", "heldout3", "heldout4"])
def test_no_dense_item_says_a_reversal_pairs_sentence_again(name: str) -> None:
    """A row holding a pair's sentence ("... por hectare nesta safra." beside the pair's
    "... por hectare.") is not planted: its copy would be counted as the superseded value
    shown without its update."""
    for item_set in sentence_sets(DATA, name, seeds=2):
        pairs = [(item_set.items[i].text, later) for i, later in item_set.updates.items()]
        said = [_key(text) for pair in pairs for text in pair]
        firsts = {first for first, _ in pairs}
        for item in item_set.items:
            if item.text not in firsts:
                key = _key(item.text)
                assert not any(key in other or other in key for other in said), item.text
