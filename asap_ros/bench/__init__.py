"""Benchmarks of the control path: they print figures and assert nothing about speed."""
