"""The marker walk that decides which project an event belongs to, and the project id."""

import hashlib
import os

import pytest

from kirolearn.core.project import MARKERS, find_project_root, project_id


@pytest.fixture
def user_home(tmp_path):
    home = tmp_path / "home"
    (home / ".kiro").mkdir(parents=True)  # Kiro's global config: never a project marker
    return home


@pytest.mark.parametrize("marker", MARKERS)
def test_every_marker_makes_a_root(user_home, marker):
    root = user_home / "code" / "app"
    (root / "deep" / "er").mkdir(parents=True)
    (root / marker).touch()
    assert find_project_root(str(root / "deep" / "er"), str(user_home)) == (str(root), False)


def test_nearest_marker_wins(user_home):
    outer = user_home / "mono"
    inner = outer / "packages" / "web"
    inner.mkdir(parents=True)
    (outer / ".git").mkdir()
    (inner / "package.json").touch()
    assert find_project_root(str(inner / "."), str(user_home)) == (str(inner), False)


def test_home_itself_is_global_and_never_inspected(user_home):
    assert find_project_root(str(user_home), str(user_home)) == (str(user_home), True)
    (user_home / "notes").mkdir()
    # ~/.kiro exists, yet a marker-less folder under home is global, not "home is a project".
    assert find_project_root(str(user_home / "notes"), str(user_home)) == (str(user_home), True)


def test_outside_home_is_walked_too(tmp_path, user_home):
    work = tmp_path / "workspaces" / "svc"
    (work / "src").mkdir(parents=True)
    (work / "go.mod").touch()
    assert find_project_root(str(work / "src"), str(user_home)) == (str(work), False)


def test_no_marker_anywhere_is_global(tmp_path, user_home):
    lost = tmp_path / "scratch" / "x"
    lost.mkdir(parents=True)
    assert find_project_root(str(lost), str(user_home)) == (str(user_home), True)


def test_symlinked_cwd_resolves_to_the_real_root(tmp_path, user_home):
    real = user_home / "real"
    (real / "sub").mkdir(parents=True)
    (real / "pyproject.toml").touch()
    link = tmp_path / "link"
    os.symlink(real, link)
    assert find_project_root(str(link / "sub"), str(user_home)) == (str(real), False)


def test_missing_cwd_does_not_raise(user_home):
    root, is_global = find_project_root(str(user_home / "gone" / "away"), str(user_home))
    assert is_global and root == str(user_home)


def test_project_id_is_16_hex_digits_of_sha256():
    assert project_id("/home/u/proj") == hashlib.sha256(b"/home/u/proj").hexdigest()[:16]
