"""What the device can do: a table of specs, and a probe that maps the running device to one."""
