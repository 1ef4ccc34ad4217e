# cmake -DOBJDUMP=objdump -DLIB=libmbcf.so.1 -DPABI=34
#       [-DMAP=libmbcf.map -DSONAME=libmbcf.so.1] -P check-symbols.cmake
#
# What the library needs: only what libibverbs' provider ABI offers, symbols
# versioned IBVERBS_1.* (public) or IBVERBS_PRIVATE_<PABI>, plus libc's
# (GLIBC_*).  An unversioned strong reference, or one to another library,
# would bind to whatever happens to be loaded, so it fails the build.
#
# What it offers (with MAP and SONAME): its SONAME is SONAME, its version
# definitions are exactly MAP's version nodes, and it exports exactly the
# symbols MAP lists as global, each under its node (and the nodes' own
# absolute symbols): no symbol more (a
# leaked internal one would become ABI), none less, none moved.
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
set(exported "")
foreach(l IN LISTS lines)
  if(NOT l MATCHES "^[0-9a-f]+ ")
    continue()
  endif()
  if(NOT l MATCHES "\\*UND\\*")
    # "<addr> <flags> <section> <size> <version> <name>"
    if(NOT l MATCHES "^[0-9a-f]+ .......[ \t]+([^ \t]+)[ \t]+[0-9a-f]+[ \t]+(\\(?[^ \t)]+\\)?)[ \t]+(.+)$")
      list(APPEND bad "unparsed: ${l}")
      continue()
    endif()
    set(ver "${CMAKE_MATCH_2}")
    set(sym "${CMAKE_MATCH_3}")
    # A hidden (non-default) version is shown in parentheses: keep them.
    list(APPEND exported "${sym}@${ver}")
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

if(NOT MAP AND NOT SONAME)
  return()
endif()
if(NOT MAP OR NOT SONAME)
  message(FATAL_ERROR "check-symbols: -DMAP= and -DSONAME= go together")
endif()

# The version script: "NODE {", "global:", "sym;", "local: *;", "} PARENT;"
# (comments /* */ removed first).
file(READ "${MAP}" map)
string(REGEX REPLACE "/\\*([^*]|\\*+[^*/])*\\*+/" "" map "${map}")
# ";" separates CMake list items: make it "," first.
string(REPLACE ";" "," map "${map}")
string(REPLACE "\n" ";" maplines "${map}")
set(node "")
set(scope "")
set(nodes "")
set(want "")
foreach(l IN LISTS maplines)
  string(STRIP "${l}" l)
  if(l STREQUAL "")
    continue()
  elseif(l MATCHES "^([A-Za-z0-9_.]+)[ \t]*{$")
    set(node "${CMAKE_MATCH_1}")
    set(scope "")
    list(APPEND nodes "${node}")
  elseif(l MATCHES "^}")
    set(node "")
  elseif(l MATCHES "^(global|local):[ \t]*(.*)$")
    set(scope "${CMAKE_MATCH_1}")
    if(scope STREQUAL "local" AND NOT CMAKE_MATCH_2 STREQUAL "*,")
      message(FATAL_ERROR "check-symbols: ${MAP}: unexpected '${l}'")
    endif()
  elseif(node AND scope STREQUAL "global" AND l MATCHES "^([A-Za-z_][A-Za-z0-9_]*),$")
    list(APPEND want "${CMAKE_MATCH_1}@${node}")
  else()
    message(FATAL_ERROR "check-symbols: ${MAP}: cannot read '${l}'")
  endif()
endforeach()
if(NOT want)
  message(FATAL_ERROR "check-symbols: ${MAP}: no global symbol")
endif()
list(LENGTH want n)
# A shared library also exports each node's name as an absolute symbol.
foreach(node IN LISTS nodes)
  list(APPEND want "${node}@${node}")
endforeach()

set(failed "")
list(SORT want)
list(SORT exported)
if(NOT want STREQUAL exported)
  set(missing ${want})
  set(extra ${exported})
  if(exported)
    list(REMOVE_ITEM missing ${exported})
  endif()
  list(REMOVE_ITEM extra ${want})
  list(JOIN missing " " missing)
  list(JOIN extra " " extra)
  list(APPEND failed "exports differ from ${MAP}: missing [${missing}], extra [${extra}]")
endif()

execute_process(COMMAND "${OBJDUMP}" -p "${LIB}"
  OUTPUT_VARIABLE headers RESULT_VARIABLE rv)
if(NOT rv EQUAL 0)
  message(FATAL_ERROR "check-symbols: ${OBJDUMP} -p ${LIB} failed")
endif()
set(soname "")
if(headers MATCHES "\n[ \t]*SONAME[ \t]+([^ \t\n]+)")
  set(soname "${CMAKE_MATCH_1}")
endif()
if(NOT soname STREQUAL SONAME)
  list(APPEND failed "SONAME is '${soname}', expected '${SONAME}'")
endif()
# "Version definitions:" then "<n> <flags> <hash> <name>": the first (flags
# 0x01) is the file's own name, the others the nodes.
set(defs "")
if(headers MATCHES "Version definitions:\n(([0-9]+ [^\n]*\n|\t[^\n]*\n)*)")
  string(REPLACE "\n" ";" deflines "${CMAKE_MATCH_1}")
  foreach(l IN LISTS deflines)
    if(l MATCHES "^[0-9]+ 0x00 0x[0-9a-f]+ ([^ \t]+)")
      list(APPEND defs "${CMAKE_MATCH_1}")
    endif()
  endforeach()
endif()
if(NOT defs STREQUAL nodes)
  list(APPEND failed "version definitions [${defs}], expected [${nodes}]")
endif()

if(failed)
  list(JOIN failed "\n  " failed)
  message(FATAL_ERROR "${LIB}:\n  ${failed}")
endif()
message(STATUS "${LIB}: SONAME ${soname}, exactly ${n} symbols of ${MAP} in [${nodes}]")
