"""Fixtures for the operator tests (the real-server ones come from ``tests/conftest.py``)."""

from ._hung import hung_port  # noqa: F401 - a fixture
