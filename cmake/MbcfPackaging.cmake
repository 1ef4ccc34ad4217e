# Debian packages and the DKMS source tree, all from the one project version
# (project(mbcf VERSION ...); the module's copy of it is mbcf-version.h,
# generated in the top-level CMakeLists.txt).  Included after provider/.
#
#   target mbcf_dkms_tree (ALL)
#       ${CMAKE_BINARY_DIR}/dkms/mbcf-<version>/: the module source staged
#       for Kbuild by kmod/stage.sh (as the CMake module build stages it)
#       plus dkms.conf from kmod/dkms.conf.in.  Needs no kernel headers.
#   cmake --install build --component dkms
#       installs that tree as /usr/src/mbcf-<version> (a plain
#       `cmake --install` leaves it out); then `dkms install mbcf/<version>`.
#   target package
#       the Debian packages mbcf-dkms and libmbcf1 in ${CMAKE_BINARY_DIR}/deb/
#       (cmake/build-debs.sh: dpkg-buildpackage of debian/ on a staged copy
#       of the source, reusing the rdma-core tree this build fetched).

include_guard(GLOBAL)

set(MBCF_DKMS_TREE ${CMAKE_BINARY_DIR}/dkms/mbcf-${PROJECT_VERSION})
configure_file(${PROJECT_SOURCE_DIR}/kmod/dkms.conf.in
  ${MBCF_DKMS_TREE}/dkms.conf @ONLY)

file(GLOB _mbcf_dkms_srcs CONFIGURE_DEPENDS
  ${PROJECT_SOURCE_DIR}/kmod/*.c ${PROJECT_SOURCE_DIR}/kmod/*.h
  ${PROJECT_SOURCE_DIR}/kmod/Kbuild ${PROJECT_SOURCE_DIR}/kmod/compat/*.sh
  ${PROJECT_SOURCE_DIR}/kmod/compat/*.mk ${PROJECT_SOURCE_DIR}/kmod/compat/probes/*.c
  ${PROJECT_SOURCE_DIR}/kmod/compat/required/*.c
  ${PROJECT_SOURCE_DIR}/core/*.c ${PROJECT_SOURCE_DIR}/core/*.h
  ${PROJECT_SOURCE_DIR}/include/*.h ${PROJECT_SOURCE_DIR}/include/*/*.h
  ${PROJECT_SOURCE_DIR}/include/*/*/*.h)
add_custom_command(
  OUTPUT ${CMAKE_BINARY_DIR}/dkms/stamp
  COMMAND ${PROJECT_SOURCE_DIR}/kmod/stage.sh ${PROJECT_SOURCE_DIR}
    ${MBCF_DKMS_TREE} ${MBCF_VERSION_HEADER}
  COMMAND ${CMAKE_COMMAND} -E touch ${CMAKE_BINARY_DIR}/dkms/stamp
  DEPENDS ${_mbcf_dkms_srcs} ${MBCF_VERSION_HEADER}
    ${PROJECT_SOURCE_DIR}/kmod/stage.sh
  COMMENT "DKMS source tree mbcf-${PROJECT_VERSION}"
  VERBATIM)
add_custom_target(mbcf_dkms_tree ALL DEPENDS ${CMAKE_BINARY_DIR}/dkms/stamp)

install(DIRECTORY ${MBCF_DKMS_TREE}/
  DESTINATION /usr/src/mbcf-${PROJECT_VERSION}
  COMPONENT dkms EXCLUDE_FROM_ALL)

# The provider's libibverbs ABI, for the package's dependency (debian/rules
# reads this file): the releases with the private ABI it was built for,
# libibverbs1 (>= <ABI>~) and (<< <end>~).  dpkg-shlibdeps gives the same
# lower bound from libibverbs1's symbols file (IBVERBS_PRIVATE_<n> symbols
# are tagged <n> or later); the upper bound is the first rdma-core release
# with another private ABI, which libibverbs1's own "Breaks:
# ibverbs-providers (<< N~)" does not extend to providers outside rdma-core.
# For the newest ABI no such release is known yet: the bound is the next
# rdma-core release after the one built against (65.0: << 66~), so the
# package never claims a libibverbs nobody has checked.
get_directory_property(_mbcf_pabi DIRECTORY ${PROJECT_SOURCE_DIR}/provider
  DEFINITION MBCF_RDMA_CORE_PABI_VERSION)
get_directory_property(_mbcf_pabi_end DIRECTORY ${PROJECT_SOURCE_DIR}/provider
  DEFINITION MBCF_RDMA_CORE_PABI_END)
get_directory_property(_mbcf_rc_src DIRECTORY ${PROJECT_SOURCE_DIR}/provider
  DEFINITION MBCF_RDMA_CORE_SOURCE_DIR)
get_directory_property(_mbcf_rc_ver DIRECTORY ${PROJECT_SOURCE_DIR}/provider
  DEFINITION MBCF_RDMA_CORE_VERSION)
get_directory_property(_mbcf_rc_own DIRECTORY ${PROJECT_SOURCE_DIR}/provider
  DEFINITION MBCF_RDMA_CORE_OWN_LIBIBVERBS)
if(_mbcf_pabi AND NOT _mbcf_pabi_end AND _mbcf_rc_ver MATCHES "^([0-9]+)")
  math(EXPR _mbcf_pabi_end "${CMAKE_MATCH_1} + 1")
endif()
if(_mbcf_pabi AND _mbcf_pabi_end)
  file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/provider/ibverbs-depends
    CONTENT "libibverbs1 (>= ${_mbcf_pabi}~), libibverbs1 (<< ${_mbcf_pabi_end}~)\n")
endif()

if(_mbcf_rc_own)
  # A provider for another private ABI than the installed libibverbs' links
  # rdma-core's own build: a package of it would install into that build
  # tree and take its dependencies from the wrong libibverbs1.  Packages
  # for another release are built on that release (docs/packaging.md).
  add_custom_target(package
    COMMAND ${CMAKE_COMMAND} -E echo
      "package: this build's provider is for private ABI ${_mbcf_pabi} (rdma-core ${_mbcf_rc_ver}), the installed libibverbs has another; build the packages on a system with rdma-core ${_mbcf_rc_ver} (docs/packaging.md)"
    COMMAND ${CMAKE_COMMAND} -E false
    VERBATIM)
  return()
endif()

add_custom_target(package
  COMMAND ${PROJECT_SOURCE_DIR}/cmake/build-debs.sh ${PROJECT_SOURCE_DIR}
    ${CMAKE_BINARY_DIR}/deb ${PROJECT_VERSION} "${_mbcf_rc_src}"
  COMMENT "Debian packages mbcf-dkms and libmbcf1 ${PROJECT_VERSION} (dpkg-buildpackage)"
  USES_TERMINAL
  VERBATIM)
