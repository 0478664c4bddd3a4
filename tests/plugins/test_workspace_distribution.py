"""A workspace backend offered by an installed distribution (``tether_workspace_backends``),
against a real distribution installed into a temporary venv."""

from __future__ import annotations

from tether.testing import write_profile


def _profile(folder, backend: str, plugins: str = '"box-workspace"'):
    (folder / "script.toml").write_text('[[steps]]\ntext = "hello"\n')
    return write_profile(
        folder,
        f"""
        [tether]
        plugins = [{plugins}]
        workspace = {{ backend = "{backend}" }}
        [agent.main]
        model = "scripted:script.toml"
        """,
    )


def test_hook_tether_workspace_backends_of_an_installed_distribution_opens_the_workspace(
    run_tether, tmp_path
):
    profile = _profile(tmp_path, "box")
    check = run_tether("check", "--profile", str(profile))
    assert check.returncode == 0, check.stderr
    assert not (tmp_path / ".tether" / "workspaces").exists()  # checked at load, opened on use
    run = run_tether("run", "--profile", str(profile), "hi")
    assert run.returncode == 0, run.stderr
    session = run.stdout.splitlines()[-1].removeprefix("session ")
    marker = tmp_path / ".tether" / "workspaces" / session / ".box"
    assert marker.read_text(encoding="utf-8") == session


def test_a_backend_of_a_plugin_the_profile_does_not_load_is_unknown(run_tether, tmp_path):
    profile = _profile(tmp_path, "box", plugins="")
    result = run_tether("check", "--profile", str(profile))
    assert result.returncode == 2
    assert result.stderr == (
        f'ERROR: unknown workspace backend "box" ({profile.resolve()}, [tether] '
        'workspace.backend); known backends: "local", "userns" (isolated); a plugin in '
        "[tether] plugins can offer others (tether_workspace_backends) [WORKSPACE_INVALID]\n"
    )
