# Prints the names of the targets a configured build folder defines, one per
# line, from the CMake file API's codemodel reply (any generator).
#   cmake -DBUILD=<build folder> -P list_targets.cmake
# The query (<build>/.cmake/api/v1/query/codemodel-v2) must exist before the
# configure that makes the reply.
file(GLOB index ${BUILD}/.cmake/api/v1/reply/index-*.json)
list(LENGTH index count)
if(NOT count EQUAL 1)
  message(FATAL_ERROR "${BUILD}: expected one file API reply index, found ${count}")
endif()
file(READ ${index} json)
string(JSON codemodel_file GET "${json}" reply codemodel-v2 jsonFile)
file(READ ${BUILD}/.cmake/api/v1/reply/${codemodel_file} codemodel)
string(JSON last LENGTH "${codemodel}" configurations 0 targets)
math(EXPR last "${last} - 1")
set(names "")
foreach(i RANGE ${last})
  string(JSON name GET "${codemodel}" configurations 0 targets ${i} name)
  list(APPEND names ${name})
endforeach()
list(SORT names)
list(JOIN names "\n" names)
execute_process(COMMAND ${CMAKE_COMMAND} -E echo "${names}")
