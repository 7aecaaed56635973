# Tests of the comm backends (included by tests/CMakeLists.txt): the shared conformance suite
# (comm_conformance.h) over local, tcp and mpi, the launch detection, and the comm benchmark.
onnxtrain_add_test(local_comm_conformance_test SOURCES local_comm_conformance_test.cc LIBS onnxtrain_executor
                   LABELS "unit;threads")
onnxtrain_add_test(tcp_comm_test SOURCES tcp_comm_test.cc LIBS onnxtrain_executor LABELS "unit;threads")
onnxtrain_add_test(comm_launch_test SOURCES comm_launch_test.cc LIBS onnxtrain_executor LABELS unit)
target_compile_definitions(comm_launch_test PRIVATE ONNXTRAIN_HAVE_MPI=$<BOOL:${ONNXTRAIN_HAVE_MPI}>)

if(ONNXTRAIN_HAVE_MPI)
  # Its own main: ctest starts it under mpirun (gtest_discover_tests would run it without one).
  add_executable(mpi_comm_test mpi_comm_test.cc)
  target_link_libraries(mpi_comm_test PRIVATE onnxtrain_executor GTest::gtest)
  foreach(np 1 3 4)
    add_test(NAME mpi_comm_test_np${np}
             COMMAND ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe -np ${np} $<TARGET_FILE:mpi_comm_test>)
    # Open MPI itself leaks (so no LeakSanitizer here); the ASan options otherwise follow the asan preset.
    set_tests_properties(mpi_comm_test_np${np} PROPERTIES LABELS "unit;mpi" TIMEOUT 120 ENVIRONMENT
      "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:protect_shadow_gap=0;OMPI_MCA_rmaps_base_oversubscribe=1")
  endforeach()

  # all_reduce_sum throughput, MPI backend vs MPI_Allreduce vs TCP backend; by hand only, not a ctest:
  #   mpirun --allow-run-as-root -np 2 tests/comm_bench
  add_executable(comm_bench ${PROJECT_SOURCE_DIR}/benchmarks/comm_bench.cc)
  target_link_libraries(comm_bench PRIVATE onnxtrain_executor MPI::MPI_CXX)
endif()
