#!/usr/bin/env bash
# Fills .carry/ (git-ignored) with what a device machine lacks to build aisp there: the SQLite and
# cpp-httplib headers and shared libraries of this machine, with the OpenSSL, zlib and Brotli headers
# httplib.h includes and the Brotli libraries it links (scripts/gpu-check.sh's build section looks for
# .carry/include/sqlite3.h and .carry/include/httplib.h). Name ".carry" in the device tool's `carry`.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .carry/include .carry/lib
cp /usr/include/sqlite3.h /usr/include/sqlite3ext.h /usr/include/httplib.h /usr/include/zlib.h /usr/include/zconf.h \
  .carry/include/
cp -r /usr/include/openssl /usr/include/brotli .carry/include/
cp /usr/include/x86_64-linux-gnu/openssl/* .carry/include/openssl/  # configuration.h, opensslconf.h
for lib in libsqlite3.so.0 libcpp-httplib.so.0.11 libbrotlidec.so.1 libbrotlienc.so.1 libbrotlicommon.so.1; do
  cp -L "/lib/x86_64-linux-gnu/$lib" .carry/lib/
done
du -sh .carry
