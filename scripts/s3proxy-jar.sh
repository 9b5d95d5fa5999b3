#!/usr/bin/env bash
# Fetches s3proxy (an S3 API server; filesystem back end) from Maven Central for the archive tests
# (crates/ringcap/tests/archive/) and prints the jar's path. Repeated runs reuse the local Maven repository.
# S3PROXY_JAR overrides it (an existing jar).
set -euo pipefail
if [ -n "${S3PROXY_JAR:-}" ]; then echo "$S3PROXY_JAR"; exit 0; fi
version=2.6.0
jar="$HOME/.m2/repository/org/gaul/s3proxy/$version/s3proxy-$version-jar-with-dependencies.jar"
if [ ! -f "$jar" ]; then
  command -v mvn >/dev/null || { echo "mvn not found (make deps installs maven)" >&2; exit 2; }
  mvn -q -B dependency:get -Dartifact="org.gaul:s3proxy:$version:jar:jar-with-dependencies" -Dtransitive=false >&2
fi
[ -f "$jar" ] || { echo "s3proxy $version was not fetched to $jar" >&2; exit 1; }
echo "$jar"
