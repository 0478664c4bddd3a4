"""Test support that ships with tether, so users test their plugins the way we test ours.

The pytest plugin (:mod:`tether.testing.pytest_plugin`, registered through ``pytest11``) turns
entry-point autoload off for the test session and provides fixtures:

* ``tether_profile``: write a profile (TOML text) into a temporary folder, return its path;
* ``tether_kernel``: build a :class:`tether.Kernel` from a profile and inline plugin objects.
"""

from __future__ import annotations

from ._kernel import make_kernel, write_profile

__all__ = ("make_kernel", "write_profile")
