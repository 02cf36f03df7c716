"""Drop-in integrations of the recovery engine; each module needs its own extra."""
