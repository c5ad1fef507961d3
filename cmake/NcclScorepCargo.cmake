# Cargo from CMake: finding the tools, telling the build where OTF2 is, and a target that
# runs `cargo build`. Included by the top-level CMakeLists.txt.

# Cargo, and bash for the install script.
macro(nccl_scorep_find_tools)
  find_program(CARGO_EXECUTABLE cargo
    HINTS "$ENV{CARGO_HOME}/bin" "$ENV{HOME}/.cargo/bin"
    DOC "Cargo, the Rust build tool (https://rustup.rs)")
  if(NOT CARGO_EXECUTABLE)
    message(FATAL_ERROR "cargo not found: install Rust (rustup, or the site's rust module) or set CARGO_EXECUTABLE")
  endif()
  execute_process(COMMAND "${CARGO_EXECUTABLE}" --version
    OUTPUT_VARIABLE _nccl_scorep_cargo_version OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _nccl_scorep_cargo_status)
  if(NOT _nccl_scorep_cargo_status EQUAL 0)
    message(FATAL_ERROR "${CARGO_EXECUTABLE} --version failed")
  endif()
  message(STATUS "Cargo: ${_nccl_scorep_cargo_version}")
  find_program(BASH_EXECUTABLE bash)
  if(NOT BASH_EXECUTABLE)
    message(FATAL_ERROR "bash not found (the install step runs scripts/install-tree.sh)")
  endif()
endmacro()

# Works out the environment that points otf2-sys/build.rs at OTF2 (OTF2_CONFIG, and
# PKG_CONFIG_PATH for its fallback) and checks at configure time that OTF2 3.x is there.
# Sets NCCL_SCOREP_CARGO_ENV: NAME=VALUE items for `cmake -E env`. Only variables with a
# value are passed: an empty OTF2_CONFIG would differ from an unset one for Cargo, and
# make it rebuild what another build of the same target directory built.
macro(nccl_scorep_find_otf2)
  set(NCCL_SCOREP_CARGO_ENV "")
  set(_nccl_scorep_otf2_config "${NCCL_SCOREP_OTF2_CONFIG}")
  if(NOT _nccl_scorep_otf2_config AND NCCL_SCOREP_OTF2_ROOT)
    set(_nccl_scorep_otf2_config "${NCCL_SCOREP_OTF2_ROOT}/bin/otf2-config")
  endif()
  if(_nccl_scorep_otf2_config)
    list(APPEND NCCL_SCOREP_CARGO_ENV "OTF2_CONFIG=${_nccl_scorep_otf2_config}")
    set(_nccl_scorep_probe "${_nccl_scorep_otf2_config}")
  elseif(DEFINED ENV{OTF2_CONFIG} AND NOT "$ENV{OTF2_CONFIG}" STREQUAL "")
    set(_nccl_scorep_probe "$ENV{OTF2_CONFIG}")
  else()
    set(_nccl_scorep_probe otf2-config)
  endif()
  if(NCCL_SCOREP_OTF2_ROOT)
    set(_nccl_scorep_pc "${NCCL_SCOREP_OTF2_ROOT}/lib/pkgconfig")
    if(DEFINED ENV{PKG_CONFIG_PATH} AND NOT "$ENV{PKG_CONFIG_PATH}" STREQUAL "")
      string(APPEND _nccl_scorep_pc ":$ENV{PKG_CONFIG_PATH}")
    endif()
    list(APPEND NCCL_SCOREP_CARGO_ENV "PKG_CONFIG_PATH=${_nccl_scorep_pc}")
  endif()
  if(NOT NCCL_SCOREP_OTF2_LINK STREQUAL "static")
    list(APPEND NCCL_SCOREP_CARGO_ENV "OTF2_SYS_LINK=${NCCL_SCOREP_OTF2_LINK}")
  endif()

  # The same question build.rs asks, so that a missing OTF2 fails now and not in the middle
  # of the build.
  execute_process(COMMAND "${_nccl_scorep_probe}" --version
    OUTPUT_VARIABLE _nccl_scorep_otf2_version OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _nccl_scorep_otf2_status ERROR_QUIET)
  if(_nccl_scorep_otf2_status EQUAL 0)
    message(STATUS "OTF2: ${_nccl_scorep_probe} (${_nccl_scorep_otf2_version})")
  else()
    find_package(PkgConfig QUIET)
    if(PkgConfig_FOUND)
      set(_nccl_scorep_saved_pc "$ENV{PKG_CONFIG_PATH}")
      if(_nccl_scorep_pc)
        set(ENV{PKG_CONFIG_PATH} "${_nccl_scorep_pc}")
      endif()
      pkg_check_modules(_NCCL_SCOREP_OTF2 QUIET otf2)
      set(ENV{PKG_CONFIG_PATH} "${_nccl_scorep_saved_pc}")
    endif()
    if(_NCCL_SCOREP_OTF2_FOUND)
      message(STATUS "OTF2: pkg-config otf2 (version ${_NCCL_SCOREP_OTF2_VERSION})")
    else()
      message(FATAL_ERROR
        "OTF2 3.x not found: `${_nccl_scorep_probe} --version` failed and pkg-config knows no otf2. "
        "Set NCCL_SCOREP_OTF2_ROOT to OTF2's prefix or NCCL_SCOREP_OTF2_CONFIG to its otf2-config "
        "(Debian/Ubuntu: apt-get install libotf2-trace-dev; Spack: otf2; EasyBuild: OTF2).")
    endif()
  endif()
endmacro()

# nccl_scorep_cargo_target(NAME PROFILE release|debug ARGS <cargo build args> BYPRODUCTS <files>)
# A target, built by default, that runs `cargo build` every time: Cargo knows best what is
# out of date, and does nothing when nothing is.
function(nccl_scorep_cargo_target name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "PROFILE" "ARGS;BYPRODUCTS")
  set(profile_args "")
  if(arg_PROFILE STREQUAL "release")
    set(profile_args --release)
  endif()
  list(JOIN arg_ARGS " " shown_args)
  add_custom_target(${name} ALL
    COMMAND "${CMAKE_COMMAND}" -E env
      "CARGO_TARGET_DIR=${NCCL_SCOREP_CARGO_TARGET_DIR}" ${NCCL_SCOREP_CARGO_ENV}
      "${CARGO_EXECUTABLE}" build ${profile_args} ${arg_ARGS} ${NCCL_SCOREP_CARGO_FLAGS}
    WORKING_DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}"
    BYPRODUCTS ${arg_BYPRODUCTS}
    COMMENT "cargo build ${profile_args} ${shown_args}"
    USES_TERMINAL
    VERBATIM)
endfunction()
