# ruff: noqa: A005 - the package is named for the layer it tests, never imported as `http`
