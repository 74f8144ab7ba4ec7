"""The declared record schema, one module per record kind (or per workload's kinds) plus the
field groups they share (fields.py): each kind's metrics class, with unit and scope in every
name, and the class its spec reads as.

A schema module declares `KINDS`, kind name -> `RecordKind` (base.py). config/record_kinds.py
assembles the kind table from every module of this package's `__path__`, without importing any
workload, and nothing changes it at run time: a new workload's kinds are one new module here
(a test or plug-in adds a directory to `__path__`), and registering a workload whose kind no
module declares is an error (config/workload.py).
"""
