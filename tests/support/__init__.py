"""Helpers shared by the test modules, which import them from here and never from one another;
shared fixtures live in the conftest.py files."""
