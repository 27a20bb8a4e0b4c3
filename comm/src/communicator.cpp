#include <ksweep/comm/communicator.hpp>

#include <ksweep/base/environment.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#if KSWEEP_ENABLE_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's extensions: MPIX_Query_cuda_support
#endif
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

#if KSWEEP_ENABLE_MPI
struct Communicator::Handle {
  MPI_Comm comm = MPI_COMM_NULL;
  Handle() = default;
  Handle(Handle const&) = delete;
  Handle& operator=(Handle const&) = delete;
  ~Handle() {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin && comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
};
#define KSWEEP_COMM (m_handle ? m_handle->comm : MPI_COMM_WORLD)
#else
struct Communicator::Handle {};
#endif

namespace {
std::atomic<Staging> g_staging{Staging::automatic};

struct GpuAwareness {
  bool on = false;
  std::string reason;
};

GpuAwareness ask_gpu_awareness() {
  [[maybe_unused]] int const env = gpu_aware_mpi_switch();
#if !KSWEEP_ENABLE_MPI
  return {false, "no MPI in this build"};
#elif !defined(KOKKOS_ENABLE_CUDA)
  return {false, "no device backend in this build"};
#elif !KSWEEP_ENABLE_GPU_AWARE_MPI
  return {false, "staged through host memory (built with -DKSWEEP_ENABLE_GPU_AWARE_MPI=OFF)"};
#else
  if (env == 1) return {true, "GPU-aware (KSWEEP_GPU_AWARE_MPI=1)"};
  if (env == 0) return {false, "staged through host memory (KSWEEP_GPU_AWARE_MPI=0)"};
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  int init = 0;
  MPI_Initialized(&init);
  if (init && MPIX_Query_cuda_support() == 1) return {true, "GPU-aware (Open MPI reports CUDA support)"};
  return {false, "staged through host memory (Open MPI reports no CUDA support)"};
#else
  return {false,
          "staged through host memory (the MPI library has no CUDA query; KSWEEP_GPU_AWARE_MPI=1 if it is "
          "GPU-aware)"};
#endif
#endif
}

GpuAwareness const& gpu_awareness() {
  static GpuAwareness const g = ask_gpu_awareness();
  return g;
}

/// This process' place among the world's ranks on its node (size, rank). Asked once, with a
/// collective call on the world: by comm::Environment on every rank at start, so that a world
/// Communicator constructed later on some ranks alone (a member of a struct built on rank 0)
/// is not a collective call that the others never make.
struct NodeRanks {
  int size = 1, rank = 0;
};
NodeRanks ask_node_ranks() {
  NodeRanks n;
#if KSWEEP_ENABLE_MPI
  int init = 0, size = 1;
  MPI_Initialized(&init);
  if (!init) return n;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  n.size = size;
  MPI_Comm node = MPI_COMM_NULL;
  if (size > 1 && MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
    MPI_Comm_size(node, &n.size);
    MPI_Comm_rank(node, &n.rank);
    MPI_Comm_free(&node);
  }
#endif
  return n;
}
NodeRanks const& node_ranks() {
  static NodeRanks const n = ask_node_ranks();
  return n;
}
}  // namespace

void set_staging(Staging s) { g_staging = s; }
Staging staging() { return g_staging; }
bool gpu_aware_mpi() { return gpu_awareness().on; }
int gpu_aware_mpi_switch() {
  return environment_switch("KSWEEP_GPU_AWARE_MPI",
                            {"device pointers to MPI", "staged through host memory", "ask the MPI library"});
}
std::string gpu_aware_mpi_reason() { return gpu_awareness().reason; }

Environment::Environment(int& argc, char**& argv) {
#if KSWEEP_ENABLE_MPI
  int init = 0;
  MPI_Initialized(&init);
  if (!init) {
    MPI_Init(&argc, &argv);
    m_owns = true;
  }
  (void)node_ranks();  // every rank, now: the world's Communicator() asks no collective later
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
    m_local_size = node_ranks().size;
    m_local_rank = node_ranks().rank;
  }
#endif
}

void Communicator::barrier() const {
#if KSWEEP_ENABLE_MPI
  if (m_size > 1) check(MPI_Barrier(KSWEEP_COMM), "MPI_Barrier");
#endif
}

void Communicator::broadcast_bytes(void* data, std::size_t bytes, int root) const {
#if KSWEEP_ENABLE_MPI
  if (m_size == 1) return;
  auto* p = static_cast<char*>(data);
  for (std::size_t off = 0; off < bytes; off += chunk) {
    int const n = static_cast<int>(std::min(chunk, bytes - off));
    check(MPI_Bcast(p + off, n, MPI_BYTE, root, KSWEEP_COMM), "MPI_Bcast");
  }
#else
  (void)data;
  (void)bytes;
  (void)root;
#endif
}

namespace {
#if KSWEEP_ENABLE_MPI
template <class T>
void allreduce_in_place(T* data, std::size_t n, int size, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  if (size == 1) return;
  for (std::size_t off = 0; off < n; off += chunk) {
    int const c = static_cast<int>(std::min(chunk, n - off));
    check(MPI_Allreduce(MPI_IN_PLACE, data + off, c, type, op, comm), "MPI_Allreduce");
  }
}
#endif
}  // namespace

std::vector<std::string> Communicator::gather(std::string const& text, int root) const {
#if KSWEEP_ENABLE_MPI
  if (m_size > 1) {
    int const n = static_cast<int>(text.size());
    std::vector<int> sizes(m_rank == root ? m_size : 0), offsets;
    check(MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, root, KSWEEP_COMM), "MPI_Gather");
    std::string all;
    if (m_rank == root) {
      int total = 0;
      for (int s : sizes) offsets.push_back(total), total += s;
      all.resize(static_cast<std::size_t>(total));
    }
    check(MPI_Gatherv(text.data(), n, MPI_CHAR, all.data(), sizes.data(), offsets.data(), MPI_CHAR, root, KSWEEP_COMM),
          "MPI_Gatherv");
    std::vector<std::string> out;
    for (std::size_t r = 0; r < sizes.size(); ++r)
      out.push_back(all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(sizes[r])));
    return out;
  }
#endif
  (void)root;
  return {text};
}

void Communicator::allreduce_sum(double* data, std::size_t n) const {
#if KSWEEP_ENABLE_MPI
  allreduce_in_place(data, n, m_size, MPI_DOUBLE, MPI_SUM, KSWEEP_COMM);
#else
  (void)data, (void)n;
#endif
}
void Communicator::allreduce_sum(float* data, std::size_t n) const {
#if KSWEEP_ENABLE_MPI
  allreduce_in_place(data, n, m_size, MPI_FLOAT, MPI_SUM, KSWEEP_COMM);
#else
  (void)data, (void)n;
#endif
}
void Communicator::allreduce_bor(void* data, std::size_t bytes) const {
#if KSWEEP_ENABLE_MPI
  allreduce_in_place(static_cast<unsigned char*>(data), bytes, m_size, MPI_BYTE, MPI_BOR, KSWEEP_COMM);
#else
  (void)data, (void)bytes;
#endif
}

void Communicator::sendrecv_bytes(void const* send, std::size_t send_bytes, int dest, void* recv,
                                  std::size_t recv_bytes, int source) const {
#if KSWEEP_ENABLE_MPI
  auto const* sp = static_cast<char const*>(send);
  auto* rp = static_cast<char*>(recv);
  int const to = dest < 0 ? MPI_PROC_NULL : dest, from = source < 0 ? MPI_PROC_NULL : source;
  std::size_t const sb = dest < 0 ? 0 : send_bytes, rb = source < 0 ? 0 : recv_bytes;
  for (std::size_t off = 0; off < std::max(sb, rb); off += chunk) {
    int const ns = static_cast<int>(off < sb ? std::min(chunk, sb - off) : 0);
    int const nr = static_cast<int>(off < rb ? std::min(chunk, rb - off) : 0);
    check(MPI_Sendrecv(ns ? sp + off : sp, ns, MPI_BYTE, to, 23, nr ? rp + off : rp, nr, MPI_BYTE, from, 23,
                       KSWEEP_COMM, MPI_STATUS_IGNORE),
          "MPI_Sendrecv");
  }
#else
  KSWEEP_REQUIRE(dest < 0 && source < 0, "ksweep::comm::Communicator::sendrecv_bytes to rank "
                                             << dest << " / from rank " << source << " without MPI");
  (void)send, (void)send_bytes, (void)recv, (void)recv_bytes;
#endif
}

#if KSWEEP_ENABLE_MPI
struct Requests::Impl {
  std::vector<MPI_Request> pending;
};
#else
struct Requests::Impl {
  std::vector<int> pending;
};
#endif

Requests::Requests() : m_impl(std::make_unique<Impl>()) {}
Requests::~Requests() {
#if KSWEEP_ENABLE_MPI
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin)
    for (auto& q : m_impl->pending)
      if (q != MPI_REQUEST_NULL) MPI_Request_free(&q);
#endif
}
bool Requests::empty() const { return m_impl->pending.empty(); }
void Requests::wait_all() {
#if KSWEEP_ENABLE_MPI
  auto& p = m_impl->pending;
  if (!p.empty()) check(MPI_Waitall(static_cast<int>(p.size()), p.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
#endif
  m_impl->pending.clear();
}

#if KSWEEP_ENABLE_MPI
namespace {
// Starts `bytes` from `p` as messages of at most `chunk` bytes with the same tag (received in
// order): start(pointer, count, &request) per message.
template <class Byte, class Start>
void in_chunks(Byte* p, std::size_t bytes, std::vector<MPI_Request>& pending, Start&& start) {
  std::size_t off = 0;
  do {
    int const n = static_cast<int>(std::min(chunk, bytes - off));
    MPI_Request q = MPI_REQUEST_NULL;
    start(p + off, n, &q);
    pending.push_back(q);
    off += static_cast<std::size_t>(n);
  } while (off < bytes);
}
}  // namespace
#endif

void Communicator::isend_bytes(void const* data, std::size_t bytes, int dest, int tag, Requests& r) const {
#if KSWEEP_ENABLE_MPI
  if (dest < 0) return;
  in_chunks(static_cast<char const*>(data), bytes, r.m_impl->pending, [&](char const* p, int n, MPI_Request* q) {
    check(MPI_Isend(p, n, MPI_BYTE, dest, tag, KSWEEP_COMM, q), "MPI_Isend");
  });
#else
  KSWEEP_REQUIRE(dest < 0, "ksweep::comm::Communicator::isend_bytes to rank " << dest << " without MPI");
  (void)data, (void)bytes, (void)tag, (void)r;
#endif
}

void Communicator::irecv_bytes(void* data, std::size_t bytes, int source, int tag, Requests& r) const {
#if KSWEEP_ENABLE_MPI
  if (source < 0) return;
  in_chunks(static_cast<char*>(data), bytes, r.m_impl->pending, [&](char* p, int n, MPI_Request* q) {
    check(MPI_Irecv(p, n, MPI_BYTE, source, tag, KSWEEP_COMM, q), "MPI_Irecv");
  });
#else
  KSWEEP_REQUIRE(source < 0, "ksweep::comm::Communicator::irecv_bytes from rank " << source << " without MPI");
  (void)data, (void)bytes, (void)tag, (void)r;
#endif
}

Communicator Communicator::split(int color, int key) const {
  Communicator c = *this;
#if KSWEEP_ENABLE_MPI
  if (m_size == 1 && !m_handle) return c;
  auto h = std::make_shared<Handle>();
  check(MPI_Comm_split(KSWEEP_COMM, color, key, &h->comm), "MPI_Comm_split");
  MPI_Comm_rank(h->comm, &c.m_rank);
  MPI_Comm_size(h->comm, &c.m_size);
  c.m_handle = std::move(h);
#else
  (void)color, (void)key;
#endif
  return c;
}

void Communicator::send(double const* data, std::size_t n, int peer) const {
#if KSWEEP_ENABLE_MPI
  for (std::size_t off = 0; off < n; off += chunk) {
    int const c = static_cast<int>(std::min(chunk, n - off));
    check(MPI_Send(data + off, c, MPI_DOUBLE, peer, 17, KSWEEP_COMM), "MPI_Send");
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
    check(MPI_Recv(data + off, c, MPI_DOUBLE, peer, 17, KSWEEP_COMM, MPI_STATUS_IGNORE), "MPI_Recv");
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
  int world = 1;
  if (init && !fin) MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (init && !fin && world > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::exit(code);
}

int world_size() {
  int size = 1;
#if KSWEEP_ENABLE_MPI
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init && !fin) MPI_Comm_size(MPI_COMM_WORLD, &size);
#endif
  return size;
}

Slice slice_of(int n, int rank, int size) {
  int const base = n / size, extra = n % size;
  Slice s;
  s.count = base + (rank < extra ? 1 : 0);
  s.first = rank * base + std::min(rank, extra);
  return s;
}

}  // namespace ksweep::comm
