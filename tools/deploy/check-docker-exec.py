#!/usr/bin/env python3
"""No document runs os-brick-cas in kolla's nova_compute without -u root.

The image runs as kolla's nova user and the verbs that call casadm need
root: ``docker exec nova_compute os-brick-cas doctor`` is refused. Reads
README.rst, doc/, deploy/, devstack/, releasenotes/, etc/ and the CLI's
messages (os_brick_cas/), joining lines (an RST paragraph may break the
command) and RST quoting.
"""

import os
import re
import sys

ROOTS = ('README.rst', 'doc', 'deploy', 'devstack', 'releasenotes', 'etc',
         'os_brick_cas')
SUFFIXES = ('.rst', '.yml', '.yaml', '.j2', '.conf', '.py', '.txt', '.md',
            '.sh', '.sample')
COMMAND = re.compile(r'docker\s+exec\s+((?:-{1,2}[\w-]+(?:[ =]\S+)?\s+)*)'
                     r'nova_compute\s+os-brick-cas')


def files():
    for root in ROOTS:
        if os.path.isfile(root):
            yield root
        for directory, _, names in os.walk(root):
            for name in names:
                if name.endswith(SUFFIXES):
                    yield os.path.join(directory, name)


def main() -> int:
    bad, seen = [], 0
    for path in files():
        with open(path, errors='replace') as handle:
            text = handle.read()
        flat = ' '.join(text.replace('\\\n', ' ').replace("'", ' ')
                        .replace('`', ' ').split())
        for match in COMMAND.finditer(flat):
            seen += 1
            options = match.group(1).split()
            if not re.search(r'(^| )(-u|--user)[ =]?(root|0)( |$)',
                             ' '.join(options)):
                bad.append('%s: %s' % (path, match.group(0)))
    for line in bad:
        print('without -u root: %s' % line, file=sys.stderr)
    if bad or not seen:
        return 1
    print('docker exec: %d command(s) in the documents, all with -u root'
          % seen)
    return 0


if __name__ == '__main__':
    sys.exit(main())
