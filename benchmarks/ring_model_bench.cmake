# The ring-model check of issue 7 (included by benchmarks/CMakeLists.txt): point-to-point loopback
# latency and bandwidth fitted from MpiCommunicator send/recv and MPI_Send/MPI_Recv, and all_reduce_sum
# on real gradient sizes against 2(R-1)/R * bytes / bandwidth + 2(R-1) * latency. A tool, not a ctest
# (it needs mpirun and a quiet machine); benchmarks/dp_scaling.sh runs it first:
#   mpirun --allow-run-as-root --oversubscribe -np 2 build/benchmarks/ring_model_bench
if(ONNXTRAIN_HAVE_MPI)
  add_executable(ring_model_bench ${CMAKE_CURRENT_LIST_DIR}/ring_model_bench.cc)
  target_link_libraries(ring_model_bench PRIVATE onnxtrain_executor MPI::MPI_CXX)
endif()
