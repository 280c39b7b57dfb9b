"""`pip install ./python` into a fresh folder, then `import splat` from there (not from the source
tree). pip builds the wheel with the installed setuptools and wheel, offline (no build
isolation: a user's pip fetches them). Exit 77 (skipped) when pip, setuptools or wheel is missing.
    python3 pip_install_check.py SOURCE_DIR WORK_DIR"""

import os
import shutil
import subprocess
import sys


def main():
    src, work = sys.argv[1], sys.argv[2]
    for probe in (["-m", "pip", "--version"], ["-c", "import setuptools"], ["-c", "import wheel"]):
        if subprocess.run([sys.executable] + probe, capture_output=True).returncode != 0:
            print("skipped: %s %s fails" % (sys.executable, " ".join(probe)))
            return 77
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(src, os.path.join(work, "src"), ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    site = os.path.join(work, "site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
                    "--target", site, os.path.join(work, "src")], check=True)
    out = subprocess.run([sys.executable, "-c", "import splat, os; print(splat.__version__, os.path.dirname(splat.__file__))"],
                         env=dict(os.environ, PYTHONPATH=site), cwd=work, capture_output=True, text=True, check=True)
    version, where = out.stdout.split()
    if version != "0.1.0" or os.path.realpath(where) != os.path.realpath(os.path.join(site, "splat")):
        print("imported %s from %s, not the installed copy" % (version, where))
        return 1
    print("installed and imported:", out.stdout.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
