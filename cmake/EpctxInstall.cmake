# What `cmake --install <build> --prefix P` installs, and the Debian package CPack makes from it (docs/install.md):
#   P/include/epctx/{epctx,status,status_codes,ep_api}.h    the public headers (nothing from src/)
#   P/<libdir>/libepctx.so.0.1.0 (+ .so.0 SONAME, .so)       the runtime
#   P/<libdir>/epctx/libepctx_{aotcpu,example}.so          plugin EPs, registered by every epctx::Env
#   P/bin/epctx                                             the CLI, RUNPATH $ORIGIN/../<libdir> (relocatable)
#   P/<libdir>/cmake/epctx/                                 find_package(epctx CONFIG): epctx::epctx, epctx::ep_api
#   P/<libdir>/pkgconfig/epctx.pc                           pkg-config --cflags --libs epctx
# Tests, benchmarks, fuzzers and the Python module (python/, packaged as a wheel) have no install rules.
include(CMakePackageConfigHelpers)

set(EPCTX_PLUGIN_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/epctx)
set(EPCTX_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/epctx)

target_compile_features(epctx PUBLIC cxx_std_17)
install(TARGETS epctx epctx_ep_api EXPORT epctxTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES include/epctx/epctx.h include/epctx/status.h include/epctx/status_codes.h include/epctx/ep_api.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/epctx)

# Plugins: MODULE libraries, found by the Env in <folder of libepctx.so>/epctx (src/plugin/ep_library.h).
install(TARGETS epctx_aotcpu epctx_example LIBRARY DESTINATION ${EPCTX_PLUGIN_INSTALL_DIR})

# The CLI finds libepctx.so relative to itself, so an extracted or moved prefix works without LD_LIBRARY_PATH.
set_target_properties(epctx_cli PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
install(TARGETS epctx_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

install(EXPORT epctxTargets NAMESPACE epctx:: DESTINATION ${EPCTX_CMAKE_INSTALL_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/epctxConfig.cmake.in
  ${CMAKE_BINARY_DIR}/cmake/epctxConfig.cmake
  INSTALL_DESTINATION ${EPCTX_CMAKE_INSTALL_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR EPCTX_PLUGIN_INSTALL_DIR)
# 0.x: a new minor version may change the API.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/epctxConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/cmake/epctxConfig.cmake ${CMAKE_BINARY_DIR}/cmake/epctxConfigVersion.cmake
  DESTINATION ${EPCTX_CMAKE_INSTALL_DIR})

# epctx.pc names the prefix the install goes to (--prefix, or /usr inside the Debian package), so it is written at
# install time: configured once now with the prefix left as a placeholder, then per install into a folder of its
# own (two installs may run at once) and installed from there with file(INSTALL), which honours DESTDIR.
set(EPCTX_PC_PREFIX "@EPCTX_PC_PREFIX@")
configure_file(${CMAKE_CURRENT_LIST_DIR}/epctx.pc.in ${CMAKE_BINARY_DIR}/cmake/epctx.pc.in @ONLY)
install(CODE "
  set(EPCTX_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  string(RANDOM LENGTH 12 epctx_pc_tmp)
  set(epctx_pc_tmp \"${CMAKE_BINARY_DIR}/cmake/pc-\${epctx_pc_tmp}\")
  configure_file(\"${CMAKE_BINARY_DIR}/cmake/epctx.pc.in\" \"\${epctx_pc_tmp}/epctx.pc\" @ONLY)
  file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig\" TYPE FILE
       FILES \"\${epctx_pc_tmp}/epctx.pc\")
  file(REMOVE_RECURSE \"\${epctx_pc_tmp}\")")

# ---- Debian package: `cpack -G DEB` in the build folder (tests/install/deb_test.sh); never part of the build.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME epctx)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "ONNX inference runtime with EPContext models and plugin execution providers")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # epctx_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "epctx maintainers <maintainers@epctx.invalid>")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# The long description (CPack puts the summary above it and indents each line for the control file).
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "epctx runs ONNX models on a built-in CPU execution provider and on plugin \
execution providers loaded at run time, and compiles models into EPContext models (ONNX Runtime's design).
It contains the runtime libepctx.so, the AotCpu and Example plugin EPs (registered automatically from \
/usr/lib/<triplet>/epctx), the epctx command line tool, the C++ headers, a CMake package (find_package(epctx)) \
and a pkg-config file.")
# Depends: from the libraries the binaries link (dpkg-shlibdeps): oneDNN, ONNX, protobuf, xxhash, libgomp, libstdc++.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The CLI needs libepctx.so.0 from this very package; a shlibs file lets dpkg-shlibdeps (and later packages) map it.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
include(CPack)
