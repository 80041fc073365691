# Fails when libkernhub.so exports anything beyond the public API, or lacks a
# symbol an embedder needs. Run by ctest:
#   cmake -DNM=<nm> -DLIBRARY=<libkernhub.so> -P check_exports.cmake
# The allowed set mirrors cmake/kernhub.map: kernhub:: functions of the public
# headers (never an internal nested class such as Client::Impl, never a
# lambda), the typeinfo and vtable of kernhub::Error and kernhub::EventSink,
# and the C API's kh_* functions.
execute_process(COMMAND ${NM} -D --defined-only -C ${LIBRARY}
                OUTPUT_VARIABLE listing RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} failed on ${LIBRARY}")
endif()
string(REPLACE "\n" ";" lines "${listing}")
set(allowed_objects "typeinfo for kernhub::Error;typeinfo name for kernhub::Error;vtable for kernhub::Error;typeinfo for kernhub::EventSink;typeinfo name for kernhub::EventSink;vtable for kernhub::EventSink")
set(names "")
set(bad "")
foreach(line IN LISTS lines)
  # "<address> <type> <demangled name>"; a name may carry "@VERSION".
  if(NOT line MATCHES "^[0-9a-fA-F]+ [A-Za-z] (.+)$")
    continue()
  endif()
  string(REGEX REPLACE "@@?[A-Za-z0-9_.]+$" "" name "${CMAKE_MATCH_1}")
  list(APPEND names "${name}")
  if(name IN_LIST allowed_objects OR name MATCHES "^kh_[A-Za-z0-9_]+$")
    continue()
  endif()
  if(name MATCHES "^kernhub::" AND NOT name MATCHES "::Impl::|\\{lambda|::\\(anonymous namespace\\)::|^kernhub::(registry|hub|http|select|digest|store|loader|cuda|fatbin|elf|lock|archive|cache|mirror|api|common)::")
    continue()
  endif()
  list(APPEND bad "${name}")
endforeach()
set(missing "")
foreach(required "kernhub::version()" "typeinfo for kernhub::Error" "vtable for kernhub::EventSink")
  if(NOT required IN_LIST names)
    list(APPEND missing "${required}")
  endif()
endforeach()
set(load_found FALSE)
foreach(name IN LISTS names)
  if(name MATCHES "^kernhub::Client::load\\(")
    set(load_found TRUE)
  endif()
endforeach()
if(NOT load_found)
  list(APPEND missing "kernhub::Client::load(...)")
endif()
list(LENGTH names count)
if(bad OR missing)
  string(REPLACE ";" "\n  " bad_text "${bad}")
  string(REPLACE ";" "\n  " missing_text "${missing}")
  message(FATAL_ERROR "${LIBRARY} exports outside the public API:\n  ${bad_text}\n"
                      "and lacks:\n  ${missing_text}\nfix cmake/kernhub.map or the visibility of the type")
endif()
message(STATUS "${LIBRARY}: ${count} exported symbols, all public API")
