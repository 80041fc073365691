#!/usr/bin/env bash
# The installed package as a user meets it (docs/embedding.md, "Install,
# CMake, pkg-config"): install the build to a prefix (its components runtime
# and development one after the other), build the consumer example
# against it with find_package and with pkg-config, run both against the demo
# hub, then move the prefix and check that the CLI and the library still find
# the default registry inside it.
#   consume.sh <build dir> <source dir> <demo hub dir> <generator> <c++ compiler> <work dir> <libdir>
# <libdir> is CMAKE_INSTALL_LIBDIR: lib, lib64, lib/<multiarch> (relative), or
# an absolute path, which the relocation step then cannot move.
set -euo pipefail
build=$1 source=$2 hub=$3 generator=$4 cxx=$5 work=$6 libdir=$7
case $libdir in
  /*) fail_early="an absolute CMAKE_INSTALL_LIBDIR ($libdir) is not relocatable; this test needs a relative one"
      echo "SKIP: $fail_early"; exit 77 ;;
esac

rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
export KERNHUB_ENDPOINT=file://$hub KERNHUB_CACHE=$work/cache
unset KERNHUB_OFFLINE HF_HUB_OFFLINE KERNHUB_REGISTRY HF_TOKEN HF_ENDPOINT
cd "$work"  # no kernhub.json here: the default registry is the only one

fail() { echo "FAIL: $*" >&2; exit 1; }
expect_registry() {  # <program output> <prefix the registry must be in>
  grep -q "vector-add ok" <<<"$1" || fail "the consumer did not compute: $1"
  grep -qF "(registry $2/share/kernhub/registry.json)" <<<"$1" || fail "registry not from $2: $1"
}

# The two install components, one after the other: runtime (what a program
# that uses kernhub needs to run) must hold nothing of development's (what
# building against it needs), and the two together make the full install.
echo "== cmake --install $build --prefix $prefix --component runtime"
cmake --install "$build" --prefix "$prefix" --component runtime >/dev/null
runtime=$(cd "$prefix" && find . ! -type d | sort)
echo "$runtime" | sed 's/^/  /'
for expected in "./bin/kernhub" "./share/kernhub/registry.json"; do
  grep -qxF "$expected" <<<"$runtime" || fail "the runtime component lacks $expected"
done
grep -qE "^\./$libdir/libkernhub\.so\.[0-9]" <<<"$runtime" || fail "the runtime component lacks libkernhub.so.*"
grep -qE "^\./$libdir/libkernhub_c\.so\.[0-9]" <<<"$runtime" || fail "the runtime component lacks libkernhub_c.so.*"
! grep -E "^\./include/|\.a$|\.pc$|\.cmake$|/libkernhub(_c)?\.so$" <<<"$runtime" ||
  fail "the runtime component holds development files (above)"
echo "== cmake --install $build --prefix $prefix --component development"
cmake --install "$build" --prefix "$prefix" --component development >/dev/null
development=$(cd "$prefix" && find . ! -type d | sort | comm -13 <(echo "$runtime") -)
echo "$development" | sed 's/^/  /'
for expected in "./include/kernhub/kernhub.hpp" "./include/kernhub/kernhub.h" "./$libdir/libkernhub.a" \
                "./$libdir/libkernhub.so" "./$libdir/libkernhub_c.so" "./$libdir/cmake/kernhub/kernhubConfig.cmake" \
                "./$libdir/cmake/kernhub/kernhubTargets.cmake" "./$libdir/pkgconfig/kernhub.pc" \
                "./$libdir/pkgconfig/kernhub_c.pc"; do
  grep -qxF "$expected" <<<"$development" || fail "the development component lacks $expected"
done
ldd "$prefix/$libdir/libkernhub.so"

# Before 1.0 every minor version may break the ABI, so the SONAME carries
# the minor (kernhub 0.2.0: libkernhub.so.0.2), and the C library's too.
version=$("$prefix/bin/kernhub" --version)
version=${version#kernhub }
case $version in
  0.*) abi=${version%.*} ;;
  *) abi=${version%%.*} ;;
esac
soname=libkernhub.so.$abi
readelf -d "$prefix/$libdir/libkernhub.so" | grep -qF "Library soname: [$soname]" ||
  fail "libkernhub.so of kernhub $version does not have the SONAME $soname"
readelf -d "$prefix/$libdir/libkernhub_c.so" | grep -qF "Library soname: [libkernhub_c.so.$abi]" ||
  fail "libkernhub_c.so of kernhub $version does not have the SONAME libkernhub_c.so.$abi"
echo "SONAMEs: $soname, libkernhub_c.so.$abi"

echo "== find_package(kernhub): configure and build examples/consumer/cmake"
cmake -S "$source/examples/consumer/cmake" -B "$work/consumer-cmake" -G "$generator" \
      -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/consumer-cmake"
out=$("$work/consumer-cmake/kernhub_consumer")
echo "$out"
expect_registry "$out" "$prefix"
# (Captured first: grep -q stopping early would fail the pipe under pipefail.)
deps=$(ldd "$work/consumer-cmake/kernhub_consumer")
grep -qF "$prefix/$libdir/$soname" <<<"$deps" ||
  fail "the CMake consumer does not use the installed $soname"

echo "== pkg-config: examples/consumer/pkgconfig/build.sh"
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
echo "pkg-config --cflags --libs kernhub: $(pkg-config --cflags --libs kernhub)"
CXX=$cxx "$source/examples/consumer/pkgconfig/build.sh" "$work/consumer-pc"
out=$("$work/consumer-pc")
echo "$out"
expect_registry "$out" "$prefix"

echo "== relocation: move the prefix, the registry follows"
moved=$work/moved/elsewhere
mkdir -p "$work/moved"
mv "$prefix" "$moved"
list=$("$moved/bin/kernhub" list --json)
grep -qF "\"source\": \"$moved/share/kernhub/registry.json\"" <<<"$list" ||
  fail "kernhub list after the move does not read $moved/share/kernhub/registry.json"
grep -q '"name": "vector-add"' <<<"$list" || fail "the default registry's vector-add is missing after the move"
echo "$moved/bin/kernhub list: default registry at $moved/share/kernhub/registry.json"
out=$(LD_LIBRARY_PATH="$moved/$libdir" "$work/consumer-pc")
echo "$out"
expect_registry "$out" "$moved"
echo "== a relative LD_LIBRARY_PATH entry and a chdir before the first kh_prewarm"
# A C program links libkernhub_c.so (kernhub_c.pc), which needs no libstdc++.so.
${CC:-cc} -std=c99 "$source/tests/package/chdir_consumer.c" -o "$work/chdir-consumer" \
    $(PKG_CONFIG_PATH=$moved/$libdir/pkgconfig pkg-config --cflags --libs kernhub_c)
! (cd "$moved" && LD_LIBRARY_PATH=$libdir ldd "$work/chdir-consumer") | grep -q 'libstdc++' ||
  fail "a C program on kernhub_c maps libstdc++.so"
mkdir -p "$work/somewhere-else"
(cd "$moved" && LD_LIBRARY_PATH=$libdir "$work/chdir-consumer" "$work/somewhere-else") ||
  fail "the default registry was lost after a chdir (library loaded as $libdir/libkernhub_c.so.$abi)"
! grep -rqF "$work" "$moved/$libdir/pkgconfig" "$moved/$libdir/cmake" "$moved/$libdir/$soname" ||
  fail "the installed tree names its prefix"
echo "PASS"
