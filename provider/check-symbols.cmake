# cmake -DOBJDUMP=objdump -DLIB=libmbcf-rdmav34.so -DPABI=34 -P check-symbols.cmake
#
# A provider may need only what libibverbs' provider ABI offers: symbols
# versioned IBVERBS_1.* (public) or IBVERBS_PRIVATE_<PABI>, plus libc's
# (GLIBC_*).  An unversioned strong reference, or one to another library,
# would bind to whatever happens to be loaded, so it fails the build.
foreach(v OBJDUMP LIB PABI)
  if(NOT ${v})
    message(FATAL_ERROR "check-symbols: -D${v}= is required")
  endif()
endforeach()

execute_process(COMMAND "${OBJDUMP}" -T "${LIB}"
  OUTPUT_VARIABLE out RESULT_VARIABLE rv)
if(NOT rv EQUAL 0)
  message(FATAL_ERROR "check-symbols: ${OBJDUMP} -T ${LIB} failed")
endif()

string(REPLACE "\n" ";" lines "${out}")
set(bad "")
set(private 0)
foreach(l IN LISTS lines)
  if(NOT l MATCHES "\\*UND\\*")
    continue()
  endif()
  # "<addr> <flags> *UND* <size> <version> <name>"; weak flags are "w".
  if(NOT l MATCHES "\\*UND\\*[ \t]+[0-9a-f]+[ \t]+(\\(?[^ \t)]+\\)?)[ \t]+(.+)$")
    list(APPEND bad "unparsed: ${l}")
    continue()
  endif()
  set(ver "${CMAKE_MATCH_1}")
  set(sym "${CMAKE_MATCH_2}")
  string(REGEX REPLACE "[()]" "" ver "${ver}")
  if(ver MATCHES "^(IBVERBS_1\\.[0-9]+|GLIBC_[0-9.]+)$")
    continue()
  elseif(ver STREQUAL "IBVERBS_PRIVATE_${PABI}")
    math(EXPR private "${private} + 1")
    continue()
  elseif(ver STREQUAL "Base" AND l MATCHES "^[0-9a-f]+ +w ")
    continue() # weak toolchain hooks (__gmon_start__, _ITM_*)
  endif()
  list(APPEND bad "${sym} (${ver})")
endforeach()

if(bad)
  list(JOIN bad "\n  " bad)
  message(FATAL_ERROR "${LIB} needs symbols outside IBVERBS_1.*, "
    "IBVERBS_PRIVATE_${PABI} and GLIBC_*:\n  ${bad}")
endif()
if(private EQUAL 0)
  message(FATAL_ERROR "${LIB} references no IBVERBS_PRIVATE_${PABI} symbol: "
    "not linked against libibverbs' provider ABI?")
endif()
message(STATUS "${LIB}: ${private} IBVERBS_PRIVATE_${PABI} references, nothing else foreign")
