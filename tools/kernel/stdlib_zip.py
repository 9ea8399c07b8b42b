"""Pack this interpreter's pure-Python standard library into one zip.

Run with the interpreter whose library it packs (the Ansible venv's, for
the role's plays in the real-kernel guest)::

    python tools/kernel/stdlib_zip.py DIRECTORY

prints the path of ``DIRECTORY/stdlib-<version>-<prefix hash>.zip``,
building it if missing. The guest sees the host's / over 9p, where each
stat or open is a round trip through TCG's virtio: every Ansible module
is a new Python process whose standard-library imports cost about 1,700
file system calls, 20-50 s of each task. With this zip (copied once to
the guest's tmpfs) first on PYTHONPATH those imports are reads of one
local file. The zip holds the interpreter's own compiled bytecode as
sourceless ``.pyc`` (its magic number is this interpreter's: the zip is
only for it), and the source where no bytecode was compiled; extension
modules (lib-dynload) stay where they are.
"""

import hashlib
import importlib.util
import os
import sys
import sysconfig
import zipfile

#: not imported by Ansible modules or the product, or not importable
SKIP = {'test', 'site-packages', 'dist-packages', 'idlelib', 'tkinter',
        'lib2to3', 'ensurepip', 'turtledemo', 'lib-dynload', '__pycache__'}


def build(library: str, target: str) -> None:
    """Write the zip of *library* to *target* (atomically)."""
    partial = target + '.partial'
    with zipfile.ZipFile(partial, 'w', zipfile.ZIP_STORED) as archive:
        for root, dirs, files in os.walk(library):
            dirs[:] = sorted(d for d in dirs if d not in SKIP and
                             not d.startswith('config-'))
            for name in sorted(files):
                if not name.endswith('.py'):
                    continue
                source = os.path.join(root, name)
                member = os.path.relpath(source, library)
                compiled = importlib.util.cache_from_source(source)
                if os.path.isfile(compiled):
                    archive.write(compiled, member + 'c')
                else:
                    archive.write(source, member)
    os.replace(partial, target)


def main() -> int:
    directory = sys.argv[1]
    library = sysconfig.get_paths()['stdlib']
    key = hashlib.sha256(('%s %s' % (sys.version, library)).encode())
    target = os.path.join(directory, 'stdlib-%d.%d.%d-%s.zip' % (
        sys.version_info[:3] + (key.hexdigest()[:12],)))
    if not os.path.isfile(target):
        os.makedirs(directory, exist_ok=True)
        build(library, target)
    print(target)
    return 0


if __name__ == '__main__':
    sys.exit(main())
