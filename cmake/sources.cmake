# The sources of kernhub's libraries and of its command-line tool, listed by
# hand (CMakeLists.txt includes this file). A new .cpp file in src/<folder>/
# goes in KERNHUB_SOURCES under its folder's heading, one in cli/ in
# KERNHUB_CLI_SOURCES; a configure of kernhub itself stops with an error
# naming any src/*/*.cpp or cli/*.cpp file missing here. Paths are relative
# to the source folder; the order does not matter (the build sorts them, and
# with KERNHUB_UNITY each folder of src/ compiles as one unit).

set(KERNHUB_SOURCES
  # src/api/
  src/api/all_latest.cpp
  src/api/client.cpp
  src/api/client_archive.cpp
  src/api/client_cache.cpp
  src/api/client_deps.cpp
  src/api/client_lockfile.cpp
  src/api/client_mirror.cpp
  src/api/client_prewarm.cpp
  src/api/cuda_api.cpp
  src/api/default_registry.cpp
  src/api/head_first_file.cpp
  src/api/host_facts.cpp
  src/api/inspect.cpp
  src/api/setting_table.cpp
  src/api/settings.cpp
  src/api/signature.cpp
  src/api/trust.cpp
  src/api/tvm_ffi_api.cpp
  src/api/verify_blob.cpp

  # src/archive/
  src/archive/extract.cpp
  src/archive/libarchive.cpp
  src/archive/policy.cpp
  src/archive/write.cpp
  src/archive/zip_member.cpp

  # src/cache/
  src/cache/atomic_file.cpp
  src/cache/blobs.cpp
  src/cache/cache.cpp
  src/cache/file_lock.cpp
  src/cache/hf_tree.cpp
  src/cache/io_error.cpp
  src/cache/place_file.cpp
  src/cache/posix_io.cpp
  src/cache/read_file.cpp
  src/cache/receipts.cpp
  src/cache/ref_resolution.cpp
  src/cache/remove_beneath.cpp
  src/cache/variant_record.cpp

  # src/cacheadmin/
  src/cacheadmin/archive_layout.cpp
  src/cacheadmin/cache_export.cpp
  src/cacheadmin/cache_import.cpp
  src/cacheadmin/inventory.cpp
  src/cacheadmin/keep_lockfile.cpp
  src/cacheadmin/ls.cpp
  src/cacheadmin/prune.cpp
  src/cacheadmin/verify_cache.cpp

  # src/capi/
  src/capi/capi.cpp
  src/capi/hint.cpp
  src/capi/setting.cpp
  src/capi/thread_errors.cpp

  # src/common/
  src/common/dynlib.cpp
  src/common/error.cpp
  src/common/hint.cpp
  src/common/one_at_a_time.cpp
  src/common/strict_json.cpp
  src/common/python_env.cpp
  src/common/repo.cpp
  src/common/text.cpp

  # src/cuda/
  src/cuda/binding.cpp
  src/cuda/device.cpp
  src/cuda/errors.cpp
  src/cuda/library.cpp
  src/cuda/memory.cpp

  # src/deptree/
  src/deptree/metadata.cpp
  src/deptree/tree.cpp

  # src/digest/
  src/digest/digest.cpp
  src/digest/libcrypto.cpp

  # src/elf/
  src/elf/byte_reader.cpp
  src/elf/elf_binding.cpp
  src/elf/elf_file.cpp
  src/elf/elf_header.cpp
  src/elf/elf_inspect.cpp
  src/elf/glibc_version.cpp

  # src/fatbin/
  src/fatbin/bytes.cpp
  src/fatbin/cubin.cpp
  src/fatbin/entry_choice.cpp
  src/fatbin/fatbin.cpp

  # src/fetch/
  src/fetch/download.cpp
  src/fetch/fetcher.cpp
  src/fetch/listing.cpp
  src/fetch/local_kernel.cpp
  src/fetch/signature.cpp
  src/fetch/stream_check.cpp
  src/fetch/unpack.cpp

  # src/http/
  src/http/body_pipe.cpp
  src/http/curl_api.cpp
  src/http/engine.cpp
  src/http/headers.cpp
  src/http/session.cpp
  src/http/url.cpp

  # src/hub/
  src/hub/hub_client.cpp
  src/hub/transport.cpp
  src/hub/tree_page.cpp

  # src/loader/
  src/loader/artifact.cpp
  src/loader/code_file.cpp
  src/loader/cuda_kernel.cpp
  src/loader/elf.cpp
  src/loader/kinds.cpp
  src/loader/library.cpp
  src/loader/resolved_table.cpp
  src/loader/sealed_image.cpp
  src/loader/shared_object.cpp
  src/loader/ops_py.cpp
  src/loader/torch_namespace.cpp
  src/loader/torch_fit.cpp
  src/loader/torch_op.cpp
  src/loader/torch_ops.cpp
  src/loader/torch_runtime.cpp
  src/loader/tvm_ffi_function.cpp
  src/loader/verified_load.cpp

  # src/lockfile/
  src/lockfile/lockfile.cpp
  src/lockfile/read_lockfile.cpp

  # src/mirror/
  src/mirror/hub_tree.cpp
  src/mirror/nginx_conf.cpp
  src/mirror/tree_files.cpp

  # src/registry/
  src/registry/entry.cpp
  src/registry/parse.cpp
  src/registry/reference.cpp
  src/registry/registry.cpp

  # src/select/
  src/select/host.cpp
  src/select/host_spec.cpp
  src/select/rules.cpp
  src/select/select.cpp
  src/select/variant.cpp

  # src/sigstore/
  src/sigstore/bundle.cpp
  src/sigstore/crypto.cpp
  src/sigstore/root_document.cpp
  src/sigstore/transparency_log.cpp
  src/sigstore/trusted_root.cpp
  src/sigstore/verify_bundle.cpp

  # src/torchenv/
  src/torchenv/torch_facts.cpp

  # src/tvmffi/
  src/tvmffi/runtime.cpp
)

# The crash points (src/common/crash_point.hpp), compiled apart: once as
# no-ops into every library, once with the test hooks (KERNHUB_TEST_HOOKS).
set(KERNHUB_CRASH_POINT_SOURCE src/common/crash_point.cpp)

# The kernhub program (KERNHUB_BUILD_CLI).
set(KERNHUB_CLI_SOURCES
  cli/cache.cpp
  cli/cache_archive.cpp
  cli/common.cpp
  cli/fetch.cpp
  cli/hint.cpp
  cli/info.cpp
  cli/inspect.cpp
  cli/interrupt.cpp
  cli/list.cpp
  cli/load.cpp
  cli/lock.cpp
  cli/main.cpp
  cli/mirror.cpp
  cli/prewarm.cpp
  cli/verify.cpp
  cli/verify_blob.cpp
)
