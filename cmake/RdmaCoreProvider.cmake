# rdma-core's private provider headers (and, for another private ABI than
# the installed libibverbs', that release's libibverbs), generated at
# configure time.
#
# A provider is built against headers that libibverbs-dev does not ship
# (infiniband/driver.h, kern-abi.h, the generated kernel-abi/*.h, ccan/,
# util/, config.h).  They are produced here from Debian's rdma-core source
# package, never copied into this repository:
#
#   1. obtain the source: MBCF_RDMA_CORE_SOURCE if set (an unpacked tree or
#      an orig tarball); else MBCF_RDMA_CORE_SUITE's source package (a
#      Debian suite: trixie = 56.1, unstable = 65.0); else the source of the
#      installed libibverbs (fetch-rdma-core.sh: 44.0 from Debian 12's
#      deb-src, else Debian 13's 56.1, whose private ABI is the same);
#   2. read its private ABI (IBVERBS_PABI_VERSION: 34 for rdma-core 34 to
#      56.1, then 57, 59, 64, 65) and compare it with the installed
#      libibverbs' (its IBVERBS_PRIVATE_<n> symbol version);
#   3. configure it with its own CMake (no pyverbs, no man pages, no libnl)
#      and build the `kern-abi` target; when the private ABIs differ, the
#      provider cannot be linked against the installed libibverbs, so the
#      tree is configured IN_PLACE (it loads providers from its own lib/
#      and reads its own etc/libibverbs.d) and its libibverbs, example
#      programs (ibv_devices, ibv_devinfo, ibv_rc_pingpong, ...) and the
#      libmlx5/libefa that perftest links are built too.
#
# Everything lives in ${CMAKE_BINARY_DIR}/_deps/rdma-core; a stamp file makes
# a re-configure free.  Delete that directory to start over.
#
# Results (normal variables in the including scope):
#   MBCF_RDMA_CORE_FOUND         TRUE when the headers are ready
#   MBCF_RDMA_CORE_VERSION       the release used ("44.0", "56.1", "65.0")
#   MBCF_RDMA_CORE_PABI_VERSION  its private ABI ("34", ..., "65")
#   MBCF_RDMA_CORE_PABI_END      the first rdma-core release with another
#                                private ABI ("57" for 34; empty when not
#                                known: the newest ABI)
#   MBCF_RDMA_CORE_HOST_PABI     the installed libibverbs' private ABI
#   MBCF_RDMA_CORE_OWN_LIBIBVERBS TRUE when linking against the libibverbs
#                                built here (private ABI != host's)
#   MBCF_RDMA_CORE_SOURCE_DIR    the rdma-core source tree
#   MBCF_RDMA_CORE_BINARY_DIR    its build tree
#   MBCF_RDMA_CORE_INCLUDE_DIRS  include path of a provider
#   MBCF_RDMA_CORE_PROVIDER_MAP  buildlib/provider.map (version script)
#   MBCF_RDMA_CORE_ERROR         why it is not found (when not found)
# and the INTERFACE targets mbcf::rdma-core-private (include dirs, defines)
# and mbcf::ibverbs (the libibverbs to link: installed or built here).

include_guard(GLOBAL)

set(MBCF_RDMA_CORE_REQUIRED_VERSION "44.0")
# The oldest private ABI the provider supports (rdma-core 34 ... 56.1).
set(MBCF_RDMA_CORE_MIN_PABI "34")
# Each private ABI and the first rdma-core release that left it (rdma-core's
# CMakeLists.txt, IBVERBS_PABI_VERSION, per release tag): a provider built
# for ABI <n> loads in libibverbs [n, end).  The newest has no end yet.
set(_rc_pabi_ends "34:57" "57:59" "59:64" "64:65")
set(MBCF_RDMA_CORE_SOURCE "" CACHE PATH
  "rdma-core source tree or orig tarball; empty: apt-get source")
set(MBCF_RDMA_CORE_SUITE "" CACHE STRING
  "Debian suite whose rdma-core source package to build against (trixie, unstable, ...); empty: the installed libibverbs' release")

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
    # rdma-core-<ver>/ up to 56.1; Debian's 65.0 orig tarball unpacks to
    # linux-rdma-rdma-core-<commit>/.
    file(GLOB _trees "${_rc_root}/src/*/CMakeLists.txt")
    list(LENGTH _trees _n)
    if(NOT _n EQUAL 1)
      set(MBCF_RDMA_CORE_ERROR
        "${MBCF_RDMA_CORE_SOURCE} does not unpack to one source tree" PARENT_SCOPE)
      return()
    endif()
    get_filename_component(_trees "${_trees}" DIRECTORY)
    set(${out_var} "${_trees}" PARENT_SCOPE)
    return()
  endif()

  # Debian's source package, through apt (see fetch-rdma-core.sh for why
  # the fallback to Debian 13's package exists).
  message(STATUS "rdma-core: fetching Debian's rdma-core source with apt ${MBCF_RDMA_CORE_SUITE}")
  execute_process(
    COMMAND sh "${CMAKE_CURRENT_LIST_DIR}/fetch-rdma-core.sh" "${_rc_root}/fetch"
      ${MBCF_RDMA_CORE_SUITE}
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

# Reads the private ABI of the tree in ${src} into ${out_var}; sets
# MBCF_RDMA_CORE_ERROR when the provider does not support it.
function(_mbcf_rc_check_version src out_var)
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
  set(${out_var} "${_pabi}" PARENT_SCOPE)
  if(NOT _pabi MATCHES "^[0-9]+$" OR _pabi LESS MBCF_RDMA_CORE_MIN_PABI)
    set(MBCF_RDMA_CORE_ERROR
      "${src} is rdma-core '${_ver}' (private ABI '${_pabi}'); the provider needs private ABI ${MBCF_RDMA_CORE_MIN_PABI} (rdma-core 34) or newer"
      PARENT_SCOPE)
  endif()
endfunction()

# The installed libibverbs' private ABI: the N of the IBVERBS_PRIVATE_N
# symbol version libibverbs.so.1 defines; empty if none is installed.
function(_mbcf_rc_host_pabi out_var)
  set(${out_var} "" PARENT_SCOPE)
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_get_variable(_libdir libibverbs libdir)
  endif()
  find_program(MBCF_OBJDUMP NAMES objdump)
  if(NOT _libdir OR NOT MBCF_OBJDUMP OR NOT EXISTS "${_libdir}/libibverbs.so.1")
    return()
  endif()
  execute_process(COMMAND "${MBCF_OBJDUMP}" -p "${_libdir}/libibverbs.so.1"
    OUTPUT_VARIABLE _out ERROR_QUIET)
  if(_out MATCHES "IBVERBS_PRIVATE_([0-9]+)")
    set(${out_var} "${CMAKE_MATCH_1}" PARENT_SCOPE)
  endif()
endfunction()

# Configures ${src} into ${_rc_build} and builds the kern-abi target, and
# with ${own} its libibverbs and tools (IN_PLACE).
function(_mbcf_rc_build src own)
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
      "-DCMAKE_C_COMPILER=${CMAKE_C_COMPILER}" ${_rc_options} -DIN_PLACE=${own}
    OUTPUT_FILE "${_rc_root}/configure.log" ERROR_FILE "${_rc_root}/configure.log"
    RESULT_VARIABLE _rv)
  if(NOT _rv EQUAL 0)
    set(MBCF_RDMA_CORE_ERROR
      "configuring rdma-core failed, see ${_rc_root}/configure.log" PARENT_SCOPE)
    return()
  endif()
  set(_targets kern-abi)
  if(own)
    list(APPEND _targets ${_rc_own_targets})
  endif()
  message(STATUS "rdma-core: building ${_targets}")
  execute_process(
    COMMAND "${CMAKE_COMMAND}" --build "${_rc_build}" --target ${_targets}
    OUTPUT_FILE "${_rc_root}/build.log" ERROR_FILE "${_rc_root}/build.log"
    RESULT_VARIABLE _rv)
  if(NOT _rv EQUAL 0)
    set(MBCF_RDMA_CORE_ERROR
      "building rdma-core's ${_targets} failed, see ${_rc_root}/build.log" PARENT_SCOPE)
  endif()
endfunction()

# What a provider built against rdma-core's own libibverbs gets besides
# kern-abi: that libibverbs, its example programs (the guest's verbs tests
# run them), and the two provider libraries perftest links directly
# (libmlx5, libefa: the installed ones need the installed private ABI).
set(_rc_own_targets ibverbs mlx5 efa ibv_devices ibv_devinfo ibv_rc_pingpong
  ibv_uc_pingpong ibv_ud_pingpong ibv_srq_pingpong)

# What a provider includes; all must exist after kern-abi is built.
set(_rc_needed
  config.h infiniband/driver.h infiniband/kern-abi.h infiniband/cmd_ioctl.h
  kernel-abi/ib_user_verbs.h ccan/list.h util/util.h rdma/ib_user_verbs.h)

function(_mbcf_rc_prepare)
  set(_src "")
  set(MBCF_RDMA_CORE_FOUND FALSE PARENT_SCOPE)
  set(MBCF_RDMA_CORE_ERROR "" PARENT_SCOPE)
  _mbcf_rc_host_pabi(_host_pabi)
  set(MBCF_RDMA_CORE_HOST_PABI "${_host_pabi}" PARENT_SCOPE)
  set(_keyin "${MBCF_RDMA_CORE_REQUIRED_VERSION};${MBCF_RDMA_CORE_SOURCE};${_rc_options};${CMAKE_C_COMPILER}")
  if(MBCF_RDMA_CORE_SUITE)
    string(APPEND _keyin ";${MBCF_RDMA_CORE_SUITE};${_host_pabi};${_rc_own_targets}")
  endif()
  string(SHA1 _key "${_keyin}")
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
    _mbcf_rc_check_version("${_src}" _pabi)
    if(MBCF_RDMA_CORE_ERROR)
      set(MBCF_RDMA_CORE_ERROR "${MBCF_RDMA_CORE_ERROR}" PARENT_SCOPE)
      return()
    endif()
    set(_own 0)
    if(NOT _pabi STREQUAL _host_pabi)
      set(_own 1)
    endif()
    _mbcf_rc_build("${_src}" ${_own})
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
    if(_own AND NOT EXISTS "${_rc_build}/lib/libibverbs.so.1")
      set(MBCF_RDMA_CORE_ERROR
        "rdma-core's build did not produce lib/libibverbs.so.1 in ${_rc_build}" PARENT_SCOPE)
      return()
    endif()
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
  _mbcf_rc_check_version("${MBCF_RDMA_CORE_SOURCE_DIR}" MBCF_RDMA_CORE_PABI_VERSION)
  set(MBCF_RDMA_CORE_PABI_END "")
  foreach(_e IN LISTS _rc_pabi_ends)
    if(_e MATCHES "^${MBCF_RDMA_CORE_PABI_VERSION}:([0-9]+)$")
      set(MBCF_RDMA_CORE_PABI_END "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  set(MBCF_RDMA_CORE_OWN_LIBIBVERBS FALSE)
  if(NOT MBCF_RDMA_CORE_PABI_VERSION STREQUAL MBCF_RDMA_CORE_HOST_PABI)
    set(MBCF_RDMA_CORE_OWN_LIBIBVERBS TRUE)
  endif()
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
  if(NOT TARGET mbcf::ibverbs)
    add_library(mbcf_ibverbs INTERFACE)
    add_library(mbcf::ibverbs ALIAS mbcf_ibverbs)
    if(MBCF_RDMA_CORE_OWN_LIBIBVERBS)
      target_link_libraries(mbcf_ibverbs INTERFACE "${_rc_build}/lib/libibverbs.so")
    else()
      find_package(PkgConfig REQUIRED)
      pkg_check_modules(IBVERBS REQUIRED IMPORTED_TARGET libibverbs)
      target_link_libraries(mbcf_ibverbs INTERFACE PkgConfig::IBVERBS)
    endif()
  endif()
  if(MBCF_RDMA_CORE_OWN_LIBIBVERBS)
    set(_rc_lib "rdma-core ${MBCF_RDMA_CORE_VERSION}'s own libibverbs (${_rc_build}/lib; the installed one has private ABI '${MBCF_RDMA_CORE_HOST_PABI}')")
  else()
    set(_rc_lib "the installed libibverbs")
  endif()
  message(STATUS "rdma-core ${MBCF_RDMA_CORE_VERSION} provider headers (private ABI ${MBCF_RDMA_CORE_PABI_VERSION}): ${MBCF_RDMA_CORE_INCLUDE_DIRS}; linking ${_rc_lib}")
endif()
