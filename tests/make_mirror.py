"""Build the mirror the tests read (`make mirror`): every file of tests/mirror.sha256 from its public URL, checked.

    python tests/make_mirror.py --out ~/nmt-mirror [--from OTHER_MIRROR]
    NMT_MIRROR=~/nmt-mirror make test

Files already in the mirror with the right sum are kept; a wrong sum is one error line naming the URL.
"""

import argparse
import os
from pathlib import Path

from nmt.atomic import hash_file
from nmt.data.download import MIRROR_ENV, download, mirror_path
from nmt.entry import entry_point

LIST = Path(__file__).with_name("mirror.sha256")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path, help="root of the mirror to build (HOST/PATH layout)")
    parser.add_argument("--from", dest="source", type=Path, help="copy from this mirror instead of the network")
    args = parser.parse_args()
    os.environ.pop(MIRROR_ENV, None)  # the network, unless --from
    lines = LIST.read_text().splitlines()
    with entry_point():
        for line in lines:
            sha256, url = line.split()
            dest = mirror_path(url, args.out)
            if not (dest.is_file() and hash_file(dest) == sha256):
                download(url, dest, sha256=sha256, mirror=args.source)
        print(f"{args.out}: {len(lines)} files checked")


if __name__ == "__main__":
    main()
