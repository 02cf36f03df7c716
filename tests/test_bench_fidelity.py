"""benchmarks/fidelity.py builds its dense item sets as its docstring states."""

from __future__ import annotations

import pytest
from benchmarks.fidelity import DATA, Item, _key, _stale, _survival, sentence_sets


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


def test_an_update_of_two_statements_counts_when_both_are_after_the_old_value() -> None:
    """An update message's statements each carried on a line, its question not, counts."""
    item = Item(
        kind="rule", text="Use unit 4.", key="Unit 5 now", also=("Cap is 40",), stale="unit 4"
    )
    shown = "Use unit 4.\n#6: Unit 5 now.\n#6: Cap is 40."
    assert _survival(shown, [item], ["rule"]) == {"rule": [True]}
    assert not _stale(shown, item)
    partly = "Use unit 4.\n#6: Unit 5 now."
    assert _survival(partly, [item], ["rule"]) == {"rule": [False]}
    assert _stale(partly, item)
