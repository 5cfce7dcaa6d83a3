#!/usr/bin/env python
"""Django's command-line utility; the same as the ``memoryconsole`` command."""

from __future__ import annotations

import sys

from memoryconsole.cli import main

if __name__ == "__main__":
    main(sys.argv)
