"""`accelbench calibrate`: the micro-benchmarks that make a machine profile (GEMMs, fused
attention, memory bandwidth, collectives); the profile's curves are analytics/profile.py."""
