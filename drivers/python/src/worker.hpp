#pragma once
// The thread of the module that runs everything touching Kokkos (Worker, on_worker, release),
// Kokkos' and MPI's start and end, and the objects that keep Kokkos alive (Live). One definition
// for the whole module: inline variables and functions in a named namespace.

#include <ksweep/base/config.hpp>
#include <ksweep/base/error.hpp>
#include <ksweep/comm/communicator.hpp>
#include <ksweep/core/runtime.hpp>
#include <ksweep/core/step_graph.hpp>
#include <ksweep/fwi/domains.hpp>

#include <Kokkos_Core.hpp>
#include <pybind11/pybind11.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace ksweep::python {

namespace py = pybind11;

/// A request to stop, set by a caller that saw Ctrl-C, read by the work between batches.
inline std::atomic<bool> g_cancel{false};

/// What stops work at the end of a batch after Ctrl-C (the caller then raises KeyboardInterrupt).
struct Cancelled : std::exception {
  char const* what() const noexcept override { return "interrupted"; }
};

/// Whether this process is a fork() of one that had started Kokkos (set in the child by the
/// handler installed at import), and whether this process started it (read by that handler).
inline std::atomic<bool> g_forked_after_start{false};
inline std::atomic<bool> g_kokkos_started{false};
inline std::atomic<bool> g_forked{false};

/// The error of every call in a child forked after Kokkos started: neither the worker nor the
/// backend's threads exist there, and Kokkos cannot be started twice in one process.
[[noreturn]] inline void refuse_forked_child() {
  throw std::runtime_error(
      "ksweep: this process is a fork() of one that had already run ksweep; the threads that run its "
      "computations exist only in the parent, and ksweep cannot start again here. Start workers with "
      "multiprocessing's 'spawn' or 'forkserver' method (multiprocessing.get_context('spawn')), or fork "
      "before the first ksweep computation");
}

/// The thread that runs everything touching Kokkos, one piece of work at a time.
class Worker {
 public:
  static Worker& get() {
    // Never destroyed: the thread lives as long as the process. A child forked before Kokkos
    // started gets a worker of its own (the parent's thread does not exist in it).
    static Worker* w = new Worker();
    if (g_forked.exchange(false)) {
      if (g_forked_after_start) refuse_forked_child();
      auto const main = w->m_python_main;
      w = new Worker();
      w->m_python_main = main;
    }
    if (g_forked_after_start) refuse_forked_child();
    return *w;
  }
  /// Installed once at import: marks a forked child.
  static void on_fork_child() {
    g_forked = true;
    if (g_kokkos_started) g_forked_after_start = true;
  }

  /// Runs `f` on the worker and waits for it with the GIL released (called with the GIL held).
  /// Exceptions of `f` are rethrown here; a signal seen while waiting (on the main thread)
  /// cancels the work at its next batch boundary and is raised as Python's exception.
  template <class F>
  void run(F&& f) {
    std::exception_ptr error;
    bool interrupted = false;
    {
      py::gil_scoped_release nogil;
      std::lock_guard<std::mutex> one_call(m_call);
      m_caller = std::this_thread::get_id();
      g_cancel = false;
      std::unique_lock<std::mutex> lock(m_mutex);
      m_job = [&] {
        try {
          f();
        } catch (...) {
          error = std::current_exception();
        }
      };
      m_done = false;
      m_wake.notify_all();
      bool const main_thread = std::this_thread::get_id() == m_python_main;
      while (!m_done) {
        m_finished.wait_for(lock, std::chrono::milliseconds(50));
        if (m_done || !main_thread || interrupted) continue;
        lock.unlock();
        {
          py::gil_scoped_acquire gil;
          if (PyErr_CheckSignals() != 0) interrupted = true;  // the exception waits in the thread state
        }
        if (interrupted) g_cancel = true;
        lock.lock();
      }
      // What Python freed while this caller looked for signals (a handler's or the collector's
      // work), freed here on the worker.
      if (!m_graveyard.empty()) {
        m_job = [graves = std::move(m_graveyard)]() mutable { graves.clear(); };
        m_graveyard.clear();
        m_done = false;
        m_wake.notify_all();
        m_finished.wait(lock, [&] { return m_done; });
      }
      m_caller = std::thread::id();
    }
    if (interrupted) throw py::error_already_set();
    if (error) std::rethrow_exception(error);
  }

  /// Python's main thread (where signals are handled), set at import.
  void set_main_thread() { m_python_main = std::this_thread::get_id(); }

  /// Frees `p` on the worker; when this thread is already waiting in run() (Python code ran while
  /// it looked for signals), at the end of that run instead of waiting for itself.
  template <class T>
  void free(std::unique_ptr<T>& p) {
    if (std::this_thread::get_id() == m_caller) {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_graveyard.emplace_back(p.release(), [](void* q) { delete static_cast<T*>(q); });
      return;
    }
    run([&] { p.reset(); });
  }

 private:
  Worker() {
    std::thread([this] { loop(); }).detach();
  }
  void loop() {
    std::unique_lock<std::mutex> lock(m_mutex);
    for (;;) {
      m_wake.wait(lock, [&] { return static_cast<bool>(m_job); });
      auto job = std::move(m_job);
      m_job = nullptr;
      lock.unlock();
      job();
      lock.lock();
      m_done = true;
      m_finished.notify_all();
    }
  }

  std::mutex m_call, m_mutex;
  std::condition_variable m_wake, m_finished;
  std::function<void()> m_job;
  bool m_done = true;
  std::thread::id m_python_main;
  std::atomic<std::thread::id> m_caller{};         // the thread inside run(), if any
  std::vector<std::shared_ptr<void>> m_graveyard;  // freed at the end of the current run()
};

template <class F>
inline void on_worker(F&& f) {
  Worker::get().run(std::forward<F>(f));
}

/// Frees what `p` owns on the worker (views are freed where Kokkos runs); from destructors.
template <class T>
inline void release(std::unique_ptr<T>& p) noexcept {
  if (!p) return;
  try {
    Worker::get().free(p);
  } catch (...) {
    PyErr_Clear();  // a signal while freeing: freeing finished anyway
  }
}

inline bool g_we_initialized = false;
// Objects holding Kokkos memory, and whether the interpreter asked to finalize: Kokkos is
// finalized at exit once the last of them is gone (Python may destroy them after atexit runs).
inline int g_live = 0;
inline bool g_exit_requested = false;

// MPI, started by this module (on the worker, before Kokkos) when the process was launched by
// an MPI launcher and nothing (mpi4py) started it; finalized after Kokkos at exit.
inline std::unique_ptr<comm::Environment> g_mpi;

inline bool launched_by_mpi() {
  for (char const* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

inline void start_mpi_if_launched() {
  if (g_mpi || !KSWEEP_ENABLE_MPI || !launched_by_mpi()) return;
  static char name[] = "ksweep";
  static char* args[] = {name, nullptr};
  int argc = 1;
  char** argv = args;
  g_mpi = std::make_unique<comm::Environment>(argc, argv);
}

inline void finalize_when_done() {
  if (g_forked_after_start) return;  // nothing of Kokkos' runs in a forked child
  if (g_exit_requested && g_live == 0 && g_we_initialized)
    on_worker([] {
      if (Kokkos::is_initialized()) Kokkos::finalize();
      g_mpi.reset();
    });
}

/// Counts an object that holds Kokkos memory for as long as it lives.
struct Live {
  Live() { ++g_live; }
  ~Live() {
    --g_live;
    finalize_when_done();
  }
  Live(Live const&) = delete;
  Live& operator=(Live const&) = delete;
};

/// Starts Kokkos (once) with `threads` host threads (0: Kokkos' default, from OMP_NUM_THREADS
/// or the machine) and the GPU `device` (-1: KSWEEP_DEVICE where set, else the node-local rank
/// modulo the visible devices: core::device_for_process).
inline void initialize(int threads, int device) {
  if (Kokkos::is_initialized()) {
    KSWEEP_REQUIRE(threads <= 0 && device < 0, "ksweep.initialize: Kokkos is already running (with "
                                                   << core::default_concurrency()
                                                   << " threads); threads and device can only "
                                                      "be chosen before the first computation");
    return;
  }
  KSWEEP_REQUIRE(threads >= 0, "ksweep.initialize: threads = " << threads << " must be >= 1 (or None)");
  KSWEEP_REQUIRE(threads <= core::max_host_threads(),
                 "ksweep.initialize: threads = " << threads << ": more host threads than the backend runs (at most "
                                                 << core::max_host_threads() << ")");
  // The program's choice where none is given (OMP_NUM_THREADS checked, the node's cores shared
  // among its ranks).
  if (threads == 0) threads = core::HostThreads::choose(0, nullptr).threads;
#if KOKKOS_VERSION >= 40000
  std::string const t = "--kokkos-num-threads=", d = "--kokkos-device-id=";
#else
  std::string const t = "--kokkos-threads=", d = "--kokkos-device=";
#endif
  std::vector<std::string> args{"ksweep"};
  if (threads > 0) args.push_back(t + std::to_string(threads));
  // The run's switches, checked on every build as the program checks them.
  (void)core::step_graphs();
  (void)comm::gpu_aware_mpi_switch();
  (void)fwi::overlap_from_environment();
  if (device < 0) device = core::device_for_process(-1);
  if (device >= 0) args.push_back(d + std::to_string(device));
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(args.size());
  start_mpi_if_launched();
  try {
    Kokkos::initialize(argc, argv.data());
  } catch (std::exception const& e) {
    std::string reason = e.what();
    if (auto const nl = reason.find('\n'); nl != std::string::npos) reason.resize(nl);
    throw std::runtime_error("cannot start Kokkos: " + reason);
  }
  g_we_initialized = true;
  g_kokkos_started = true;
}

inline void ensure_initialized() {
  if (!Kokkos::is_initialized()) initialize(0, -1);
}

/// Called by the library after each batch of shots (on the worker): stops after Ctrl-C.
inline void stop_if_cancelled(int, int) {
  if (g_cancel) throw Cancelled();
}

}  // namespace ksweep::python
