"""The package's version: the one place it is written.

scikit-build-core reads it from here into the package metadata (pyproject.toml,
[tool.scikit-build.metadata.version]); `sds_loader.__version__` and
`sds-loader --version` import it.
"""

__version__ = "0.4.0"
