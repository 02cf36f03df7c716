"""Every event says in one line what happened: none falls back to its bare class name."""

import inspect

import chatcli.events as events


def test_every_event_class_describes_itself() -> None:
    classes = [
        c
        for c in vars(events).values()
        if inspect.isclass(c) and issubclass(c, events.Event) and c is not events.Event
    ]
    assert len(classes) >= 10
    assert [c.__name__ for c in classes if c.describe is events.Event.describe] == []
