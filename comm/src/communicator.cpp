#include <ksweep/comm/communicator.hpp>

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <type_traits>

#if KSWEEP_ENABLE_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace ksweep::comm {

#if KSWEEP_ENABLE_MPI
namespace {
void check(int rc, char const* what) {
  if (rc != MPI_SUCCESS) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    throw Error(std::string("MPI error in ") + what + ": " + std::string(msg, static_cast<std::size_t>(len)));
  }
}
constexpr std::size_t chunk = static_cast<std::size_t>(std::numeric_limits<int>::max() / 8);
}  // namespace
#endif

Environment::Environment(int& argc, char**& argv) {
#if KSWEEP_ENABLE_MPI
  int init = 0;
  MPI_Initialized(&init);
  if (!init) {
    MPI_Init(&argc, &argv);
    m_owns = true;
  }
#else
  (void)argc;
  (void)argv;
#endif
}

Environment::~Environment() {
#if KSWEEP_ENABLE_MPI
  int fin = 0;
  MPI_Finalized(&fin);
  if (m_owns && !fin) MPI_Finalize();
#endif
}

Communicator::Communicator() {
#if KSWEEP_ENABLE_MPI
  int init = 0;
  MPI_Initialized(&init);
  if (init) {
    MPI_Comm_rank(MPI_COMM_WORLD, &m_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m_size);
    m_local_size = m_size;
    MPI_Comm node = MPI_COMM_NULL;
    if (m_size > 1 &&
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
      MPI_Comm_size(node, &m_local_size);
      MPI_Comm_free(&node);
    }
  }
#endif
}

void Communicator::barrier() const {
#if KSWEEP_ENABLE_MPI
  if (m_size > 1) check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
#endif
}

void Communicator::broadcast_bytes(void* data, std::size_t bytes, int root) const {
#if KSWEEP_ENABLE_MPI
  if (m_size == 1) return;
  auto* p = static_cast<char*>(data);
  for (std::size_t off = 0; off < bytes; off += chunk) {
    int const n = static_cast<int>(std::min(chunk, bytes - off));
    check(MPI_Bcast(p + off, n, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
  }
#else
  (void)data;
  (void)bytes;
  (void)root;
#endif
}

namespace {
template <class T>
void allreduce_in_place(T* data, std::size_t n, int size) {
#if KSWEEP_ENABLE_MPI
  if (size == 1) return;
  MPI_Datatype const type = std::is_same_v<T, double> ? MPI_DOUBLE : MPI_FLOAT;
  for (std::size_t off = 0; off < n; off += chunk) {
    int const c = static_cast<int>(std::min(chunk, n - off));
    check(MPI_Allreduce(MPI_IN_PLACE, data + off, c, type, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
  }
#else
  (void)data;
  (void)n;
  (void)size;
#endif
}
}  // namespace

void Communicator::allreduce_sum(double* data, std::size_t n) const { allreduce_in_place(data, n, m_size); }
void Communicator::allreduce_sum(float* data, std::size_t n) const { allreduce_in_place(data, n, m_size); }

void Communicator::send(double const* data, std::size_t n, int peer) const {
#if KSWEEP_ENABLE_MPI
  for (std::size_t off = 0; off < n; off += chunk) {
    int const c = static_cast<int>(std::min(chunk, n - off));
    check(MPI_Send(data + off, c, MPI_DOUBLE, peer, 17, MPI_COMM_WORLD), "MPI_Send");
  }
#else
  (void)data;
  (void)n;
  throw Error("ksweep::comm::Communicator::send to rank " + std::to_string(peer) + " without MPI");
#endif
}

void Communicator::recv(double* data, std::size_t n, int peer) const {
#if KSWEEP_ENABLE_MPI
  for (std::size_t off = 0; off < n; off += chunk) {
    int const c = static_cast<int>(std::min(chunk, n - off));
    check(MPI_Recv(data + off, c, MPI_DOUBLE, peer, 17, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
  }
#else
  (void)data;
  (void)n;
  throw Error("ksweep::comm::Communicator::recv from rank " + std::to_string(peer) + " without MPI");
#endif
}

void Communicator::abort(std::string const& message, int code) const {
  std::fprintf(stderr, "ksweep: error%s: %s\n", m_size > 1 ? (" on rank " + std::to_string(m_rank)).c_str() : "",
               message.c_str());
  std::fflush(stderr);
#if KSWEEP_ENABLE_MPI
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init && !fin && m_size > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::exit(code);
}

Slice slice_of(int n, int rank, int size) {
  int const base = n / size, extra = n % size;
  Slice s;
  s.count = base + (rank < extra ? 1 : 0);
  s.first = rank * base + std::min(rank, extra);
  return s;
}

}  // namespace ksweep::comm
