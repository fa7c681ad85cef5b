"""`python -m sds_loader ...` runs the `sds-loader` command."""

from sds_loader.cli import main

raise SystemExit(main())
