"""Helpers shared by the test modules, which import them from here and never from one another
(tests/unit/test_test_layout.py checks); shared fixtures live in the conftest.py files."""
