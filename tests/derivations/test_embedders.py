"""The sentence-transformers embedder loads its model from a package, offline."""

from __future__ import annotations

import sys
import types
import zipfile

import pytest

from apps.derivations import embedders
from apps.derivations.embedders import EmbedderUnavailable, get_embedder


def test_it_unpacks_a_packaged_model_once(tmp_path, settings, monkeypatch):
    package_dir = tmp_path / "fake_model_pkg"
    package_dir.mkdir()
    with zipfile.ZipFile(package_dir / "model.zip", "w") as zf:
        zf.writestr("modules.json", "[]")
        zf.writestr("config.json", "{}")
    module = types.ModuleType("fake_model_pkg")
    module.__file__ = str(package_dir / "__init__.py")
    monkeypatch.setitem(sys.modules, "fake_model_pkg", module)
    monkeypatch.setitem(embedders.PACKAGED_MODELS, "fake", ("fake_model_pkg", "fake-model"))
    settings.HOME = tmp_path / "home"
    target = embedders._packaged_model_dir("fake")
    assert (target / "modules.json").read_text() == "[]"
    assert embedders._packaged_model_dir("fake") == target  # second call: already there


def test_it_says_which_extra_is_missing(monkeypatch):
    monkeypatch.setitem(embedders.PACKAGED_MODELS, "ghost", ("no_such_package_here", "ghost"))
    with pytest.raises(EmbedderUnavailable, match=r"\[ml\]"):
        embedders._packaged_model_dir("ghost")


def test_it_refuses_an_unknown_packaged_model():
    with pytest.raises(EmbedderUnavailable):
        embedders._packaged_model_dir("no-such-model")


def test_the_hashing_embedder_is_deterministic_and_normalised():
    embedder = get_embedder("hashing-256")
    first, second = embedder.embed(["blue courier"]), embedder.embed(["blue courier"])
    assert (first == second).all()
    assert abs(float((first[0] ** 2).sum()) - 1.0) < 1e-5
