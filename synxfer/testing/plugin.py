"""The synxfer pytest plugin, loaded through the ``pytest11`` entry point.

It registers the ``requires`` marker and skips a marked test when the
backend it runs against lacks a capability::

    @pytest.mark.requires("multipart", "server_side_copy")
    async def test_something(backend): ...

Names are :class:`~synxfer.Capabilities` field names; each must be truthy
on ``backend.capabilities`` (so ``part_checksum`` means "declares some part
checksum"). The test must use a fixture named ``backend`` (directly or
through another fixture); the check runs once fixtures are set up, and an
unknown capability name fails the test rather than skipping it.

pytest loads this module in every session of every project that has
synxfer installed, so it imports nothing heavy: not the conformance kit,
not moto.
"""

from __future__ import annotations

import dataclasses

import pytest

__all__ = ["check_requires"]

MARKER = "requires"


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker (``--strict-markers`` safe) and assertion rewriting."""
    config.addinivalue_line(
        "markers",
        f"{MARKER}(*capabilities): skip unless the `backend` fixture's Capabilities "
        "has every named field truthy (synxfer.testing)",
    )


pytest.register_assert_rewrite("synxfer.testing.conformance")


def check_requires(item: pytest.Item, backend: object) -> None:
    """Skip ``item`` if ``backend`` lacks a capability its ``requires`` markers name."""
    capabilities = getattr(backend, "capabilities", None)
    if capabilities is None or not dataclasses.is_dataclass(capabilities):
        pytest.fail(
            f"@pytest.mark.{MARKER} on {item.nodeid}: the `backend` fixture gave "
            f"{backend!r}, which has no Capabilities",
            pytrace=False,
        )
    fields = {f.name for f in dataclasses.fields(capabilities)}
    for marker in item.iter_markers(MARKER):
        for name in marker.args:
            if name not in fields:
                pytest.fail(
                    f"@pytest.mark.{MARKER}({name!r}) on {item.nodeid}: no such capability "
                    f"(known: {', '.join(sorted(fields))})",
                    pytrace=False,
                )
            if not getattr(capabilities, name):
                pytest.skip(f"{type(backend).__name__} lacks capability {name!r}")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    """Apply ``requires`` markers once the test's fixtures are set up."""
    if item.get_closest_marker(MARKER) is None:
        return
    funcargs: dict[str, object] = getattr(item, "funcargs", {})
    if "backend" not in funcargs:
        pytest.fail(
            f"@pytest.mark.{MARKER} on {item.nodeid} needs the test to use a `backend` fixture",
            pytrace=False,
        )
    check_requires(item, funcargs["backend"])
