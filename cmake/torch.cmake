# LibTorch for the torch tests, examples/embed/embed_torch and the torch
# benchmark: a torch wheel's package folder (KERNHUB_TEST_TORCH_DIR;
# tests/run.sh installs torch there from tests/requirements-torch.txt), as
# the imported target kernhub_torch (its include/, libc10.so and
# libtorch_cpu.so). find_package(Torch) is not used: its config needs a
# CUDA toolkit for a CUDA wheel and aborts without one, and it would pull in
# libtorch_cuda. Code that includes torch headers compiles as C++20 (torch
# 2.15 requires it); libkernhub never includes or links torch.
#
# Sets KERNHUB_TORCH_WHY_NOT ("" when the target exists),
# KERNHUB_TORCH_VERSION_MAJOR/MINOR (from its torch/headeronly/version.h),
# KERNHUB_TORCH_CUDA_VERSION (from its version.py) and KERNHUB_TORCH_LIB_DIR.
set(KERNHUB_TEST_TORCH_DIR "" CACHE PATH
    "A torch package folder (.../site-packages/torch) for the torch tests; tests/run.sh sets it")
set(KERNHUB_TEST_TORCH_RUNTIME_DIR "" CACHE PATH
    "A folder with the CUDA runtime libraries that torch's libtorch_cpu.so needs (libcudart, libcupti)")
set(KERNHUB_TEST_TORCH_PYTHON_SITE "" CACHE PATH
    "What `import torch` needs beyond the wheel (tests/requirements-torch-python.txt), for the label torch-python")
set(KERNHUB_TORCH_WHY_NOT "")
set(torch_dir "${KERNHUB_TEST_TORCH_DIR}")
if(NOT torch_dir)
  set(KERNHUB_TORCH_WHY_NOT "KERNHUB_TEST_TORCH_DIR is not set (tests/run.sh installs torch and sets it)")
elseif(NOT EXISTS ${torch_dir}/include/torch/library.h OR NOT EXISTS ${torch_dir}/lib/libtorch_cpu.so
       OR NOT EXISTS ${torch_dir}/lib/libc10.so OR NOT EXISTS ${torch_dir}/include/torch/headeronly/version.h)
  set(KERNHUB_TORCH_WHY_NOT "${torch_dir} is not a torch package folder with include/ and lib/libtorch_cpu.so")
else()
  file(STRINGS ${torch_dir}/include/torch/headeronly/version.h torch_version_lines
       REGEX "#define TORCH_VERSION_(MAJOR|MINOR) [0-9]+")
  foreach(line ${torch_version_lines})
    if(line MATCHES "TORCH_VERSION_(MAJOR|MINOR) ([0-9]+)")
      set(KERNHUB_TORCH_VERSION_${CMAKE_MATCH_1} ${CMAKE_MATCH_2})
    endif()
  endforeach()
  # The CUDA version the wheel was built with (version.py's cuda = '13.2';
  # "" for a CPU build or a LibTorch root).
  set(KERNHUB_TORCH_CUDA_VERSION "")
  if(EXISTS ${torch_dir}/version.py)
    file(STRINGS ${torch_dir}/version.py torch_cuda_line REGEX "^cuda[^=]*= *'[0-9]+\\.[0-9]+'")
    if(torch_cuda_line MATCHES "'([0-9]+\\.[0-9]+)'")
      set(KERNHUB_TORCH_CUDA_VERSION ${CMAKE_MATCH_1})
    endif()
  endif()
  set(KERNHUB_TORCH_LIB_DIR ${torch_dir}/lib)
  add_library(kernhub_torch_c10 SHARED IMPORTED)
  set_target_properties(kernhub_torch_c10 PROPERTIES IMPORTED_LOCATION ${torch_dir}/lib/libc10.so
                                                     IMPORTED_SONAME libc10.so)
  add_library(kernhub_torch SHARED IMPORTED)
  # SYSTEM: torch's headers do not compile under kernhub's warning flags.
  set_target_properties(kernhub_torch PROPERTIES
    IMPORTED_LOCATION ${torch_dir}/lib/libtorch_cpu.so
    IMPORTED_SONAME libtorch_cpu.so
    INTERFACE_SYSTEM_INCLUDE_DIRECTORIES ${torch_dir}/include
    INTERFACE_INCLUDE_DIRECTORIES ${torch_dir}/include
    INTERFACE_LINK_LIBRARIES kernhub_torch_c10
    INTERFACE_COMPILE_FEATURES cxx_std_20)
endif()
if(KERNHUB_TORCH_WHY_NOT)
  message(STATUS "torch not found: ${KERNHUB_TORCH_WHY_NOT}; the torch tests will be skipped")
else()
  message(STATUS "torch ${KERNHUB_TORCH_VERSION_MAJOR}.${KERNHUB_TORCH_VERSION_MINOR}: ${torch_dir}")
endif()

# kernhub_link_torch(TARGET): TARGET includes torch's headers (C++20) and
# links libtorch_cpu and libc10, found at run time through an RPATH that
# covers their dependencies too (--disable-new-dtags: a RUNPATH would serve
# only the program's own NEEDED entries, not libtorch_cpu's libcudart).
function(kernhub_link_torch target)
  target_link_libraries(${target} PRIVATE kernhub_torch)
  set_target_properties(${target} PROPERTIES CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON)
  target_link_options(${target} PRIVATE LINKER:--disable-new-dtags)
  set(rpath ${KERNHUB_TORCH_LIB_DIR})
  if(KERNHUB_TEST_TORCH_RUNTIME_DIR)
    list(APPEND rpath ${KERNHUB_TEST_TORCH_RUNTIME_DIR})
  endif()
  set_property(TARGET ${target} APPEND PROPERTY BUILD_RPATH ${rpath})
endfunction()
