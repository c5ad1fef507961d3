# ctest smoke tests of the build: the tool runs and reports, the manual pages are written,
# and nccl-sim (the NCCL stand-in) loads the built plugin as NCCL would. The whole
# configure-build-install-use cycle is tested by scripts/test-install.sh.

set(_nccl_scorep_test_dir "${CMAKE_CURRENT_BINARY_DIR}/smoke")

add_test(NAME nccl-scorep-version COMMAND "${NCCL_SCOREP_BUILT_TOOL}" --version)
set_tests_properties(nccl-scorep-version PROPERTIES
  PASS_REGULAR_EXPRESSION "^nccl-scorep ${PROJECT_VERSION}")

# doctor finds OTF2, which the build itself needed; missing NCCL or MPI is not an error.
add_test(NAME nccl-scorep-doctor COMMAND "${NCCL_SCOREP_BUILT_TOOL}" doctor)
set_tests_properties(nccl-scorep-doctor PROPERTIES
  PASS_REGULAR_EXPRESSION "found +otf2-config|found +libotf2"
  ENVIRONMENT "NCCL_PROFILER_PLUGIN=${NCCL_SCOREP_BUILT_PLUGIN}")

add_test(NAME nccl-scorep-man-pages
  COMMAND "${NCCL_SCOREP_BUILT_TOOL}" generate man "${_nccl_scorep_test_dir}/man1")
set_tests_properties(nccl-scorep-man-pages PROPERTIES
  PASS_REGULAR_EXPRESSION "nccl-scorep\\.1.*nccl-scorep-run\\.1.*nccl-scorep-validate\\.1")

if(NCCL_SCOREP_BUILD_SIM)
  # One rank, the "single" scenario: nccl-sim prints "Loaded nccl-scorep" when the
  # plugin's init succeeded; its trace goes to the build directory.
  add_test(NAME nccl-sim-loads-plugin
    COMMAND "${NCCL_SCOREP_BUILT_SIM}" run --scenario single --plugin "${NCCL_SCOREP_BUILT_PLUGIN}")
  set_tests_properties(nccl-sim-loads-plugin PROPERTIES
    PASS_REGULAR_EXPRESSION "Loaded nccl-scorep"
    FAIL_REGULAR_EXPRESSION "NCCL-Score-P\\] Warning"
    ENVIRONMENT "NCCL_SCOREP_OUTPUT_DIR=${_nccl_scorep_test_dir}/sim-out;NCCL_SCOREP_AUTO_MERGE=0"
    TIMEOUT 120)
endif()
