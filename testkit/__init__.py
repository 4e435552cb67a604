"""Helpers shared by the tests and the benchmarks (importable as a package: ``from testkit import pdfgen``)."""
