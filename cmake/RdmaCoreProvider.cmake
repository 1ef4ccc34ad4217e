# rdma-core 44.0's private provider headers, generated at configure time.
#
# A provider is built against headers that libibverbs-dev does not ship
# (infiniband/driver.h, kern-abi.h, the generated kernel-abi/*.h, ccan/,
# util/, config.h).  They are produced here from Debian's rdma-core source
# package, never copied into this repository:
#
#   1. obtain the source: MBCF_RDMA_CORE_SOURCE if set (an unpacked tree or
#      an orig tarball), otherwise Debian's source package through apt
#      (fetch-rdma-core.sh: 44.0 from Debian 12's deb-src, else Debian 13's
#      56.1, whose 44.0 orig tarball the archive may no longer serve);
#   2. check it has private ABI 34 (what Debian 12's libibverbs 44.0
#      exports as IBVERBS_PRIVATE_34; provider.abi checks the ops layout);
#   3. configure it with its own CMake (no pyverbs, no man pages, no libnl)
#      and build only the `kern-abi` target.
#
# Everything lives in ${CMAKE_BINARY_DIR}/_deps/rdma-core; a stamp file makes
# a re-configure free.  Delete that directory to start over.
#
# Results (normal variables in the including scope):
#   MBCF_RDMA_CORE_FOUND         TRUE when the headers are ready
#   MBCF_RDMA_CORE_VERSION       the release used: "44.0", or "56.1" (same
#                                private ABI) where 44.0's tarball is gone
#   MBCF_RDMA_CORE_PABI_VERSION  "34"
#   MBCF_RDMA_CORE_PABI_END      "57": the first rdma-core release with another
#                                private ABI (the package's upper bound)
#   MBCF_RDMA_CORE_SOURCE_DIR    the rdma-core source tree
#   MBCF_RDMA_CORE_BINARY_DIR    its build tree
#   MBCF_RDMA_CORE_INCLUDE_DIRS  include path of a provider
#   MBCF_RDMA_CORE_PROVIDER_MAP  buildlib/provider.map (version script)
#   MBCF_RDMA_CORE_ERROR         why it is not found (when not found)
# and the INTERFACE target mbcf::rdma-core-private (include dirs, defines).

include_guard(GLOBAL)

set(MBCF_RDMA_CORE_REQUIRED_VERSION "44.0")
set(MBCF_RDMA_CORE_REQUIRED_PABI "34")
# rdma-core 34 ... 56 export IBVERBS_PRIVATE_34; v57.0 moved to
# IBVERBS_PRIVATE_57 (rdma-core's git history), so libibverbs 57 and later
# cannot load this provider.
set(MBCF_RDMA_CORE_REQUIRED_PABI_END "57")
set(MBCF_RDMA_CORE_SOURCE "" CACHE PATH
  "rdma-core ${MBCF_RDMA_CORE_REQUIRED_VERSION} source tree or orig tarball; empty: apt-get source")

set(_rc_root "${CMAKE_BINARY_DIR}/_deps/rdma-core")
set(_rc_build "${_rc_root}/build")
# Options of rdma-core's own configure: only what the headers need.
set(_rc_options
  -DNO_PYVERBS=1 -DNO_MAN_PAGES=1 -DENABLE_RESOLVE_NEIGH=0
  -DENABLE_VALGRIND=0 -DENABLE_STATIC=0 -DCMAKE_BUILD_TYPE=Release)

# Sets ${out_var} to the source tree, or leaves it empty and sets
# MBCF_RDMA_CORE_ERROR.
function(_mbcf_rc_fetch out_var)
  set(${out_var} "" PARENT_SCOPE)
  if(MBCF_RDMA_CORE_SOURCE)
    if(IS_DIRECTORY "${MBCF_RDMA_CORE_SOURCE}")
      set(${out_var} "${MBCF_RDMA_CORE_SOURCE}" PARENT_SCOPE)
      return()
    endif()
    if(NOT EXISTS "${MBCF_RDMA_CORE_SOURCE}")
      set(MBCF_RDMA_CORE_ERROR
        "MBCF_RDMA_CORE_SOURCE=${MBCF_RDMA_CORE_SOURCE} does not exist" PARENT_SCOPE)
      return()
    endif()
    file(REMOVE_RECURSE "${_rc_root}/src")
    file(ARCHIVE_EXTRACT INPUT "${MBCF_RDMA_CORE_SOURCE}"
      DESTINATION "${_rc_root}/src")
    file(GLOB _trees LIST_DIRECTORIES true "${_rc_root}/src/rdma-core-*")
    list(LENGTH _trees _n)
    if(NOT _n EQUAL 1)
      set(MBCF_RDMA_CORE_ERROR
        "${MBCF_RDMA_CORE_SOURCE} does not unpack to one rdma-core-* directory" PARENT_SCOPE)
      return()
    endif()
    set(${out_var} "${_trees}" PARENT_SCOPE)
    return()
  endif()

  # Debian's source package, through apt (see fetch-rdma-core.sh for why
  # the fallback to Debian 13's package exists).
  message(STATUS "rdma-core: fetching Debian's rdma-core source with apt")
  execute_process(
    COMMAND sh "${CMAKE_CURRENT_LIST_DIR}/fetch-rdma-core.sh" "${_rc_root}/fetch"
    OUTPUT_VARIABLE _tree OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_VARIABLE _err
    TIMEOUT 600
    RESULT_VARIABLE _rv)
  if(NOT _rv EQUAL 0 OR NOT EXISTS "${_tree}/CMakeLists.txt")
    set(MBCF_RDMA_CORE_ERROR "fetching rdma-core's source failed:\n${_err}" PARENT_SCOPE)
    return()
  endif()
  set(${out_var} "${_tree}" PARENT_SCOPE)
endfunction()

# Checks version and private ABI of the tree in ${src}; sets
# MBCF_RDMA_CORE_ERROR on mismatch.
function(_mbcf_rc_check_version src)
  file(STRINGS "${src}/CMakeLists.txt" _lines
    REGEX "^set\\((PACKAGE_VERSION|IBVERBS_PABI_VERSION) ")
  set(_ver "")
  set(_pabi "")
  foreach(_l IN LISTS _lines)
    if(_l MATCHES "^set\\(PACKAGE_VERSION \"([^\"]+)\"")
      set(_ver "${CMAKE_MATCH_1}")
    elseif(_l MATCHES "^set\\(IBVERBS_PABI_VERSION \"([^\"]+)\"")
      set(_pabi "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  if(NOT _pabi STREQUAL MBCF_RDMA_CORE_REQUIRED_PABI)
    set(MBCF_RDMA_CORE_ERROR
      "${src} is rdma-core '${_ver}' (private ABI '${_pabi}'); the provider needs private ABI ${MBCF_RDMA_CORE_REQUIRED_PABI} (IBVERBS_PRIVATE_${MBCF_RDMA_CORE_REQUIRED_PABI}), that of Debian 12's libibverbs 44.0"
      PARENT_SCOPE)
  endif()

endfunction()

# Configures ${src} into ${_rc_build} and builds the kern-abi target.
function(_mbcf_rc_build src)
  find_program(MBCF_NINJA NAMES ninja ninja-build)
  if(MBCF_NINJA)
    set(_gen -G Ninja "-DCMAKE_MAKE_PROGRAM=${MBCF_NINJA}")
  else()
    set(_gen -G "Unix Makefiles")
  endif()
  file(REMOVE_RECURSE "${_rc_build}")
  message(STATUS "rdma-core: configuring ${src}")
  execute_process(
    COMMAND "${CMAKE_COMMAND}" ${_gen} -S "${src}" -B "${_rc_build}"
      "-DCMAKE_C_COMPILER=${CMAKE_C_COMPILER}" ${_rc_options}
    OUTPUT_FILE "${_rc_root}/configure.log" ERROR_FILE "${_rc_root}/configure.log"
    RESULT_VARIABLE _rv)
  if(NOT _rv EQUAL 0)
    set(MBCF_RDMA_CORE_ERROR
      "configuring rdma-core failed, see ${_rc_root}/configure.log" PARENT_SCOPE)
    return()
  endif()
  message(STATUS "rdma-core: building target kern-abi")
  execute_process(
    COMMAND "${CMAKE_COMMAND}" --build "${_rc_build}" --target kern-abi
    OUTPUT_FILE "${_rc_root}/build.log" ERROR_FILE "${_rc_root}/build.log"
    RESULT_VARIABLE _rv)
  if(NOT _rv EQUAL 0)
    set(MBCF_RDMA_CORE_ERROR
      "building rdma-core's kern-abi target failed, see ${_rc_root}/build.log" PARENT_SCOPE)
  endif()
endfunction()

# What a provider includes; all must exist after kern-abi is built.
set(_rc_needed
  config.h infiniband/driver.h infiniband/kern-abi.h infiniband/cmd_ioctl.h
  kernel-abi/ib_user_verbs.h ccan/list.h util/util.h rdma/ib_user_verbs.h)

function(_mbcf_rc_prepare)
  set(_src "")
  set(MBCF_RDMA_CORE_FOUND FALSE PARENT_SCOPE)
  set(MBCF_RDMA_CORE_ERROR "" PARENT_SCOPE)
  string(SHA1 _key "${MBCF_RDMA_CORE_REQUIRED_VERSION};${MBCF_RDMA_CORE_SOURCE};${_rc_options};${CMAKE_C_COMPILER}")
  set(_stamp "${_rc_root}/ready.stamp")
  if(EXISTS "${_stamp}")
    file(STRINGS "${_stamp}" _st)
    list(LENGTH _st _n)
    if(_n EQUAL 2)
      list(GET _st 0 _st_key)
      list(GET _st 1 _st_src)
      if(_st_key STREQUAL _key
         AND EXISTS "${_rc_build}/include/infiniband/driver.h"
         AND EXISTS "${_st_src}/buildlib/provider.map")
        set(_src "${_st_src}")
      endif()
    endif()
  endif()

  if(NOT _src)
    file(REMOVE "${_stamp}")
    file(MAKE_DIRECTORY "${_rc_root}")
    _mbcf_rc_fetch(_src)
    if(NOT _src)
      set(MBCF_RDMA_CORE_ERROR "${MBCF_RDMA_CORE_ERROR}" PARENT_SCOPE)
      return()
    endif()
    _mbcf_rc_check_version("${_src}")
    if(MBCF_RDMA_CORE_ERROR)
      set(MBCF_RDMA_CORE_ERROR "${MBCF_RDMA_CORE_ERROR}" PARENT_SCOPE)
      return()
    endif()
    _mbcf_rc_build("${_src}")
    if(MBCF_RDMA_CORE_ERROR)
      set(MBCF_RDMA_CORE_ERROR "${MBCF_RDMA_CORE_ERROR}" PARENT_SCOPE)
      return()
    endif()
    foreach(_h IN LISTS _rc_needed)
      if(NOT EXISTS "${_rc_build}/include/${_h}")
        set(MBCF_RDMA_CORE_ERROR
          "rdma-core's build did not produce include/${_h} in ${_rc_build}" PARENT_SCOPE)
        return()
      endif()
    endforeach()
    file(WRITE "${_stamp}" "${_key}\n${_src}\n")
  endif()

  set(MBCF_RDMA_CORE_SOURCE_DIR "${_src}" PARENT_SCOPE)
  set(MBCF_RDMA_CORE_FOUND TRUE PARENT_SCOPE)
endfunction()

_mbcf_rc_prepare()

if(MBCF_RDMA_CORE_FOUND)
  file(STRINGS "${MBCF_RDMA_CORE_SOURCE_DIR}/CMakeLists.txt" _rc_verline
    REGEX "^set\\(PACKAGE_VERSION ")
  string(REGEX REPLACE ".*\"([^\"]+)\".*" "\\1" MBCF_RDMA_CORE_VERSION "${_rc_verline}")
  set(MBCF_RDMA_CORE_PABI_VERSION "${MBCF_RDMA_CORE_REQUIRED_PABI}")
  set(MBCF_RDMA_CORE_PABI_END "${MBCF_RDMA_CORE_REQUIRED_PABI_END}")
  set(MBCF_RDMA_CORE_BINARY_DIR "${_rc_build}")
  # rdma-core publishes every header a provider may use (its libibverbs,
  # ccan/, util/, kernel-headers/ as rdma/, generated kernel-abi/, config.h
  # and its fixup headers) under one directory of its build tree.
  set(MBCF_RDMA_CORE_INCLUDE_DIRS "${_rc_build}/include")
  set(MBCF_RDMA_CORE_PROVIDER_MAP "${MBCF_RDMA_CORE_SOURCE_DIR}/buildlib/provider.map")
  if(NOT TARGET mbcf::rdma-core-private)
    add_library(mbcf_rdma_core_private INTERFACE)
    add_library(mbcf::rdma-core-private ALIAS mbcf_rdma_core_private)
    target_include_directories(mbcf_rdma_core_private SYSTEM INTERFACE
      ${MBCF_RDMA_CORE_INCLUDE_DIRS})
    # rdma-core builds everything as gnu11 with _GNU_SOURCE semantics.
    target_compile_definitions(mbcf_rdma_core_private INTERFACE _GNU_SOURCE)
  endif()
  message(STATUS "rdma-core ${MBCF_RDMA_CORE_VERSION} provider headers: ${MBCF_RDMA_CORE_INCLUDE_DIRS}")
endif()
