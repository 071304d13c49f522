"""scripts/ensure_run_deps.sh: `make setup` installs bubblewrap for script.python, or says how (issue 15)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ensure_run_deps.sh"
HINT = "sudo apt-get install bubblewrap"
IS_ROOT = os.geteuid() == 0

# Stands in for apt-get: logs its arguments, fails the first install (a stale package list),
# and on a later install puts a bwrap next to itself.
FAKE_APT_GET = """#!/bin/bash
PATH=/usr/bin:/bin
echo "$*" >> "$(dirname "$0")/calls"
if [ "$1" = install ]; then
  [ -e "$(dirname "$0")/failed-once" ] || { touch "$(dirname "$0")/failed-once"; exit 100; }
  printf '#!/bin/bash\\n' > "$(dirname "$0")/bwrap" && chmod +x "$(dirname "$0")/bwrap"
fi
"""


def _run(path: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["/bin/bash", str(SCRIPT)], env={"PATH": path, **env}, capture_output=True,
                          text=True, timeout=60, check=False)


def _bin_without_bwrap(tmp_path: Path) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "id").symlink_to(shutil.which("id"))
    return folder


@pytest.mark.skipif(shutil.which("bwrap") is None or not Path("/usr/bin/python3").exists(),
                    reason="needs bubblewrap and /usr/bin/python3 installed")
def test_says_nothing_and_succeeds_when_everything_is_there():
    done = _run(os.environ["PATH"])
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_not_root_and_missing_prints_one_line_naming_the_command_and_goes_on(tmp_path):
    done = _run(str(_bin_without_bwrap(tmp_path)), POWERON_ASSUME_NOT_ROOT="1")
    assert done.returncode == 0 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and HINT in lines[0] and "script.python" in lines[0]


@pytest.mark.skipif(not IS_ROOT, reason="the install path runs only as root")
def test_root_without_apt_get_prints_the_hint_and_goes_on(tmp_path):
    done = _run(str(_bin_without_bwrap(tmp_path)))
    assert done.returncode == 0
    assert len(done.stderr.splitlines()) == 1 and HINT in done.stderr


@pytest.mark.skipif(not IS_ROOT, reason="the install path runs only as root")
def test_root_installs_with_apt_get_updating_the_list_once_when_the_install_fails(tmp_path):
    folder = _bin_without_bwrap(tmp_path)
    apt_get = folder / "apt-get"
    apt_get.write_text(FAKE_APT_GET)
    apt_get.chmod(0o755)
    done = _run(str(folder))
    assert done.returncode == 0, done.stderr
    calls = (folder / "calls").read_text().splitlines()
    assert [call.split()[0] for call in calls] == ["install", "update", "install"]
    assert "bubblewrap" in calls[0] and "-y" in calls[0].split()
    assert HINT not in done.stderr and (folder / "bwrap").exists()
    again = _run(str(folder))
    assert (again.returncode, again.stderr) == (0, "")
    assert len((folder / "calls").read_text().splitlines()) == 3
