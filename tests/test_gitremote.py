"""A project's git remote as its identity across machines (kirolearn/core/gitremote.py)."""

import shutil
import subprocess

import pytest

from kirolearn.core import gitremote

GITHUB_FORMS = [
    "git@github.com:org/repo.git",
    "git@github.com:org/repo",
    "https://github.com/org/repo.git",
    "https://github.com/org/repo/",
    "https://user:s3cr3t-t0ken@github.com/org/repo.git",
    "https://x-access-token:ghp_abc@github.com:443/org/repo",
    "http://github.com/org/repo",
    "ssh://git@github.com/org/repo.git",
    "ssh://git@github.com:22/org/repo",
    "git+ssh://git@github.com/org/repo.git/",
    "git://github.com/org/repo.git",
    "  https://GitHub.com/Org/Repo.git  ",
    "https://github.com//org//repo.git?query=1#frag",
]


@pytest.mark.parametrize("url", GITHUB_FORMS)
def test_every_form_of_one_repository_normalises_alike(url):
    assert gitremote.normalise(url) == "github.com/org/repo"


@pytest.mark.parametrize(
    "url, expected",
    [
        ("git@gitlab.example.com:group/sub/proj.git", "gitlab.example.com/group/sub/proj"),
        ("ssh://git@gitlab.example.com:2222/group/sub/proj.git", "gitlab.example.com/group/sub/proj"),
        ("host:~user/r.git", "host/~user/r"),
        ("ssh://host/~user/r", "host/~user/r"),
        ("[::1]:repo.git", "[::1]/repo"),
        ("https://[::1]:8443/org/r.git", "[::1]/org/r"),
        ("file:///srv/Git/x.git", "/srv/Git/x"),  # local paths keep their case
        ("/srv/Git/x.git", "/srv/Git/x"),
        ("../up/x.git", "/base/up/x"),
        ("", None),
        ("   ", None),
        ("https://github.com/", None),
        ("git@github.com:", None),
        ("https://host/a\nb", None),
    ],
)
def test_other_forms(url, expected):
    assert gitremote.normalise(url, base="/base/here") == expected


def test_normalised_remote_never_holds_credentials():
    for url in GITHUB_FORMS:
        out = gitremote.normalise(url)
        assert "s3cr3t" not in out and "ghp_" not in out and "@" not in out


CONFIG = r"""
[core]
	repositoryformatversion = 0
	bare = false
# a comment [remote "commented"]
[remote "upstream"]
	url = https://github.com/upstream/repo.git
	fetch = +refs/heads/*:refs/remotes/upstream/*
[branch "main"]
	remote = origin
	url = https://not-a-remote.example/x
[remote "origin"]
	URL = "git@github.com:org/repo.git" ; trailing comment
	url = https://second-url-is-ignored/x
[remote "with \"quote\""] url = https://example.com/q/r
[remote.legacy]
	url = https://example.com/legacy/r # comment
"""


def test_config_parsing_finds_each_remotes_first_url_in_file_order():
    assert gitremote.remote_urls(CONFIG) == [
        ("upstream", "https://github.com/upstream/repo.git"),
        ("origin", "git@github.com:org/repo.git"),
        ('with "quote"', "https://example.com/q/r"),
        ("legacy", "https://example.com/legacy/r"),
    ]


def test_odd_but_valid_headers_and_broken_ones():
    text = (
        '[ remote  "a]b" ]\n url = https://h/a-b\n'
        '[remote "broken\n url = https://h/broken\n'
        '[Remote "MixedCase"]\n url = https://h/mixed\n'
    )
    assert gitremote.remote_urls(text) == [("a]b", "https://h/a-b"), ("MixedCase", "https://h/mixed")]


def test_origin_first_else_the_first_remote():
    remotes = gitremote.remote_urls(CONFIG)
    assert gitremote.pick_remote(remotes) == ("origin", "git@github.com:org/repo.git")
    assert gitremote.pick_remote([r for r in remotes if r[0] != "origin"])[0] == "upstream"
    assert gitremote.pick_remote([]) is None


def _repo(path, *remotes):
    """A .git folder with just a config naming `remotes` ((name, url) pairs)."""
    git = path / ".git"
    git.mkdir(parents=True)
    lines = ["[core]", "\tbare = false"]
    for name, url in remotes:
        lines += [f'[remote "{name}"]', f"\turl = {url}", f"\tfetch = +refs/heads/*:refs/remotes/{name}/*"]
    (git / "config").write_text("\n".join(lines) + "\n")
    return path


def test_two_clones_at_different_paths_share_an_identity(tmp_path):
    a = _repo(tmp_path / "laptop-a" / "repo", ("origin", "git@github.com:org/repo.git"))
    b = _repo(tmp_path / "elsewhere" / "clone", ("origin", "https://dev:tok@github.com/org/repo"))
    assert gitremote.identity(str(a), home=str(tmp_path)) == "git:github.com/org/repo"
    assert gitremote.identity(str(b), home=str(tmp_path)) == "git:github.com/org/repo"


def test_no_remote_or_no_repository_means_no_identity(tmp_path):
    assert gitremote.identity(str(_repo(tmp_path / "local-only")), home=str(tmp_path)) is None
    (tmp_path / "plain").mkdir()
    assert gitremote.identity(str(tmp_path / "plain"), home=str(tmp_path)) is None


def test_a_project_inside_a_repository_keeps_its_subpath(tmp_path):
    repo = _repo(tmp_path / "mono", ("origin", "git@github.com:org/mono.git"))
    (repo / "packages" / "web").mkdir(parents=True)
    assert (
        gitremote.identity(str(repo / "packages" / "web"), home=str(tmp_path))
        == "git:github.com/org/mono//packages/web"
    )


def test_home_is_never_inspected(tmp_path):
    home = _repo(tmp_path / "home", ("origin", "git@github.com:me/dotfiles.git"))
    (home / "notes").mkdir()
    assert gitremote.identity(str(home / "notes"), home=str(home)) is None
    assert gitremote.identity(str(home), home=str(home)) is None


def test_unreadable_or_huge_config_is_no_identity(tmp_path):
    repo = _repo(tmp_path / "r", ("origin", "git@github.com:org/r.git"))
    (repo / ".git" / "config").write_bytes(b'[remote "origin"]\n url = x/y\n' + b"#" * (1 << 20))
    assert gitremote.identity(str(repo), home=str(tmp_path)) is None
    (repo / ".git" / "config").unlink()
    assert gitremote.identity(str(repo), home=str(tmp_path)) is None


def test_a_gitdir_file_points_to_the_real_git_folder(tmp_path):
    """Submodules and `git clone --separate-git-dir` leave a `.git` file."""
    real = _repo(tmp_path / "store", ("origin", "git@github.com:org/sub.git")) / ".git"
    work = tmp_path / "work"
    work.mkdir()
    (work / ".git").write_text(f"gitdir: {real}\n")
    assert gitremote.identity(str(work), home=str(tmp_path)) == "git:github.com/org/sub"
    (work / ".git").write_text("not a gitdir link\n")
    assert gitremote.identity(str(work), home=str(tmp_path)) is None


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_linked_worktree_reads_its_main_repositorys_config(tmp_path):
    main = tmp_path / "main"
    env = {
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
        "PATH": "/usr/bin:/bin",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }

    def git(*args, cwd=main):
        subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, timeout=30)

    git("init", "-q", str(main), cwd=tmp_path)
    git("remote", "add", "origin", "https://github.com/org/repo.git")
    git("commit", "-q", "--allow-empty", "-m", "first")
    git("worktree", "add", "-q", str(tmp_path / "feature"))
    assert (tmp_path / "feature" / ".git").is_file()
    assert gitremote.identity(str(tmp_path / "feature"), home=str(tmp_path)) == "git:github.com/org/repo"
    assert gitremote.identity(str(main), home=str(tmp_path)) == "git:github.com/org/repo"
