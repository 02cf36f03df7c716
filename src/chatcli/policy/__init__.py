"""The recovery policy, in parts with one concern each (see docs/design/recovery.md).

The public names are re-exported by `chatcli.recovery`; import them from there.
"""
