"""``amqp_sansio_common.submodules.on_first_use``: a package's submodules
loaded when first read (both client adapters' ``client_0_9_1``/``client_1_0``;
tests/adapters/test_adapters_alike.py checks those in a fresh interpreter)."""

from __future__ import annotations

import types

import pytest

from amqp_sansio_common.submodules import on_first_use


def test_a_name_is_loaded_when_read_and_listed_before() -> None:
    loaded: list[str] = []
    lazy = types.ModuleType("pkg.lazy")

    def load() -> types.ModuleType:
        loaded.append("lazy")
        return lazy

    namespace = {"__name__": "pkg", "eager": 1}
    getattr_, dir_ = on_first_use(namespace, {"lazy": load})
    assert dir_() == ["__name__", "eager", "lazy"] and loaded == []
    assert getattr_("lazy") is lazy and loaded == ["lazy"]
    with pytest.raises(AttributeError, match="module 'pkg' has no attribute 'other'"):
        getattr_("other")
    assert loaded == ["lazy"]


def test_the_adapters_say_what_they_lack() -> None:
    import amqp_sansio_socket
    import amqp_sansio_trio

    for mod in (amqp_sansio_socket, amqp_sansio_trio):
        with pytest.raises(AttributeError, match=f"module {mod.__name__!r} has no attribute"):
            _ = mod.client_0_8
        assert hasattr(mod, "client_1_0") and "client_0_9_1" in dir(mod)
