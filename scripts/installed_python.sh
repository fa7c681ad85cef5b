# Sourced by the scripts that run in the environment scripts/bootstrap.sh
# installed into: sets PY to that interpreter, chosen as bootstrap chooses
# it ($PYTHON, else the active virtual or conda environment, else the
# project's .venv), or python3 when none of them exists.
if [ -n "${PYTHON:-}" ]; then
    PY="$PYTHON"
elif [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then
    PY="$VIRTUAL_ENV/bin/python"
elif [ -n "${CONDA_PREFIX:-}" ] && [ -x "$CONDA_PREFIX/bin/python" ]; then
    PY="$CONDA_PREFIX/bin/python"
elif [ -x .venv/bin/python ]; then
    PY="$PWD/.venv/bin/python"
else
    PY="python3"
fi
