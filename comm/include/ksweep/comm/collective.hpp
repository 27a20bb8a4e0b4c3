#pragma once
/// \file collective.hpp
/// Errors that stop every rank together. A check that fails on some ranks (a file one rank
/// cannot read, a value out of range) must not leave the others waiting in the next collective
/// call, nor end the run by MPI_Abort: each rank says what it found, and every rank throws
/// CollectiveError at the same point, so that all unwind (removing their scratch) and exit with
/// the same code. With one rank these are the plain checks.

#include <ksweep/base/error.hpp>
#include <ksweep/comm/communicator.hpp>

#include <exception>
#include <optional>
#include <string>
#include <utility>

namespace ksweep::comm {

/// An error found by every rank at the same point: the caller reports it once (rank 0's message)
/// and every rank exits normally with code 1.
class CollectiveError : public std::exception {
 public:
  explicit CollectiveError(std::string message) : m_message(std::move(message)) {}
  char const* what() const noexcept override { return m_message.c_str(); }

 private:
  std::string m_message;
};

/// Collective: `error` is what this rank found (empty: nothing). When any rank found an error,
/// every rank throws CollectiveError: rank 0's message when rank 0 failed (the caller prints it
/// once), else each failing rank prints its own on stderr, naming its rank, and the
/// CollectiveError is empty.
void settle(Communicator const& comm, std::string const& error);

/// Collective: every rank must hold the same `text` as rank 0. When some do not, throws
/// CollectiveError on every rank naming `what` and the ranks that differ, so that ranks started
/// with different arguments or inputs stop together at the start.
void agree_on(Communicator const& comm, std::string const& what, std::string const& text);

/// Collective: the value of `f()` on every rank; a ksweep::Error on any rank stops every rank
/// together (settle).
template <class F>
auto on_every_rank(Communicator const& comm, F&& f) {
  std::optional<decltype(f())> value;
  std::string error;
  try {
    value.emplace(f());
  } catch (Error const& e) {
    error = e.what();
  }
  settle(comm, error);
  return std::move(*value);
}

/// Collective: runs `f` (work of every rank, or of rank 0 alone), catching ksweep::Error (its
/// message behind `prefix`), then settle: every rank stops together when any failed.
template <class F>
void collectively(Communicator const& comm, F&& f, std::string const& prefix = {}) {
  std::string error;
  try {
    f();
  } catch (Error const& e) {
    error = prefix + e.what();
  }
  settle(comm, error);
}

}  // namespace ksweep::comm
