#!/usr/bin/env bash
# Fetches the Apache Kafka broker (KRaft mode) and its dependencies from Maven Central into a cache dir outside
# the source tree, for the Kafka records tests (crates/ringcap/tests/kafka.rs). Prints the jar dir.
# (The dir name carries the pom's revision: change it when the pom changes.)
# KAFKA_JARS overrides the dir; a complete dir (marker file) is reused, so repeated runs cost nothing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${KAFKA_JARS:-${XDG_CACHE_HOME:-$HOME/.cache}/ringcap-kafka/4.1.1-1}"
if [ ! -f "$dir/.complete" ]; then
  command -v mvn >/dev/null || { echo "mvn not found (make deps installs maven)" >&2; exit 2; }
  mkdir -p "$dir"
  mvn -q -B -f "$here/kafka/pom.xml" dependency:copy-dependencies \
    -DoutputDirectory="$dir" -DincludeScope=runtime >&2
  ls "$dir"/kafka_2.13-*.jar >/dev/null
  touch "$dir/.complete"
fi
echo "$dir"
