#!/bin/sh
# Builds the consumer example with a plain compiler command and pkg-config:
#   PKG_CONFIG_PATH=<prefix>/lib/pkgconfig examples/consumer/pkgconfig/build.sh [output]
# The rpath lets the program find libkernhub.so without LD_LIBRARY_PATH.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-kernhub_consumer_pc}
set -x
${CXX:-c++} -std=c++17 -O2 "$here/../cmake/main.cpp" -o "$out" $(pkg-config --cflags --libs kernhub) \
    -Wl,-rpath,"$(pkg-config --variable=libdir kernhub)"
