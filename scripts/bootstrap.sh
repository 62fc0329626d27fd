#!/usr/bin/env bash
# Installs what gridstream needs on a fresh machine: a virtualenv with the package and its
# extras, the pinned JVM artifacts (Maven, once), and for tests the kcat client, Debian's
# PostgreSQL server (started by the tests through `gridstream stack`) and Chromium (the
# status page's browser test, headless).
# Idempotent and quick when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

want_tests=0
[ "${1:-}" = "--tests" ] && want_tests=1

PYTHON=${PYTHON:-python3}
"$PYTHON" - <<'PY' || { echo "gridstream needs Python >= 3.11 (set PYTHON=...)" >&2; exit 1; }
import sys
sys.exit(0 if sys.version_info >= (3, 11) else 1)
PY
command -v java >/dev/null || [ -n "${JAVA_HOME:-}" ] || { echo "gridstream needs Java 17 (java on PATH or JAVA_HOME)" >&2; exit 1; }
command -v mvn >/dev/null || { echo "gridstream needs Maven (mvn) to fetch its JVM artifacts once" >&2; exit 1; }

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
stamp=.venv/.gridstream-installed
digest=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$digest" ]; then
  echo "installing Python packages into .venv (first time: a few minutes, pyspark is large) ..."
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e ".[dev]"
  echo "$digest" > "$stamp"
fi

.venv/bin/gridstream stack fetch >/dev/null

# Debian packages the tests need: kcat (a third-party Kafka client), the PostgreSQL
# server (binaries in /usr/lib/postgresql/<version>/bin) and Chromium (headless).
missing=()
if [ "$want_tests" = 1 ]; then
  command -v kcat >/dev/null || missing+=(kcat)
  compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
  command -v chromium >/dev/null || missing+=(chromium)
fi
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing ${missing[*]} (used by the tests) ..."
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "the tests need: ${missing[*]} (apt-get install ${missing[*]})" >&2; exit 1
  fi
fi
