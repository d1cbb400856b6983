"""A deterministic simulation of zerorename's jobs, streams and operator commands on the
in-memory store, in the way FoundationDB tests itself: one seed drives which actors run,
how their requests interleave and which faults they meet; an independent checker holds
the end state to DESIGN.md's invariants. ``python -m zerorename.sim --help``."""
