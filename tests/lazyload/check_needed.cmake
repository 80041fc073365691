# cmake -DFILE=<elf> -P check_needed.cmake: fails when FILE's dynamic
# section lists libcurl, libcrypto, libssl or libarchive as NEEDED, or has
# no NEEDED entry at all (readelf output not understood), or when FILE
# leaves a curl_, EVP_, ERR_ or archive_ symbol undefined (a direct call
# that bypasses the run-time binding; a shared library links even so).
# -DALSO_FORBIDDEN="libm;libstdc++" names more libraries FILE must not list.
find_program(READELF readelf REQUIRED)
execute_process(COMMAND ${READELF} -d ${FILE} OUTPUT_VARIABLE dynamic RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "readelf -d ${FILE} failed (${status})")
endif()
string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*\\[[^]\n]*\\]" needed "${dynamic}")
if(NOT needed)
  message(FATAL_ERROR "no NEEDED entry found in ${FILE}:\n${dynamic}")
endif()
message(STATUS "${FILE}: ${needed}")
foreach(entry ${needed})
  if(entry MATCHES "\\[(libcurl|libcrypto|libssl|libarchive)[^]]*\\]")
    message(FATAL_ERROR "${FILE} links ${CMAKE_MATCH_1} (${entry}); it must be bound at run time on first need")
  endif()
  # Compared as names, not as regular expressions: "libstdc++" is none.
  string(REGEX MATCH "\\[([^].]*)\\." name "${entry}")
  set(library "${CMAKE_MATCH_1}")
  list(FIND ALSO_FORBIDDEN "${library}" forbidden)
  if(NOT forbidden EQUAL -1)
    message(FATAL_ERROR "${FILE} links ${library} (${entry}); its start-up must not map it")
  endif()
endforeach()

execute_process(COMMAND ${READELF} -W --dyn-syms ${FILE} OUTPUT_VARIABLE symbols RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "readelf --dyn-syms ${FILE} failed (${status})")
endif()
string(REGEX MATCHALL " UND (curl_|EVP_|ERR_|archive_)[A-Za-z0-9_@.]*" direct "${symbols}")
if(direct)
  message(FATAL_ERROR "${FILE} calls the network stack directly:${direct}; call it through the bound table")
endif()
