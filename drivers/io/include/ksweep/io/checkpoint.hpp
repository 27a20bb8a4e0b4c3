#pragma once
/// \file checkpoint.hpp
/// The checkpoint of `ksweep fwi`: everything needed to continue a run bit-identically (model,
/// Adam moments, random generator, iteration, histories), the configuration it was made with,
/// and a SHA-256 checksum over its bytes. Reading trusts nothing: the checksum, every range
/// and the configuration are checked, and every error names the file.
///
/// File layout: "KSWCKPT2", uint64 length L, L bytes of JSON metadata, the float32 arrays
/// (the model: `parameters` x `n` values, vp then rho; Adam's m and v: `moments` x `n` values
/// each; format 3 with L-BFGS: its pairs' s and y, `pairs` x `moments` x `n` values each, oldest
/// first, then its gradient, `moments` x `n` values when it has one), then "SHA256:" and the 64
/// hexadecimal digits of the SHA-256 of every byte before it. The metadata's "n" counts cells,
/// "parameters" and "moments" the segments (1 when absent); format 3's "lbfgs" object holds
/// "pairs", "gradient" (whether the gradient is stored), "rho", "loss", "gamma", "iterations"
/// and "evaluations" (absent: no L-BFGS memory). Format 2 (no "lbfgs") is still read.

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ksweep::io {

struct Config;

struct Checkpoint {
  int iteration = 0;  ///< iterations done
  std::string rng;    ///< std::mt19937_64 state as written by operator<<
  nlohmann::json history = nlohmann::json::array();
  /// The run's identity: {"config": config_to_json(...), "data": {...hashes...}}.
  nlohmann::json run;
  /// The model, [parameter][cell]: vp, then (variable density) rho.
  std::vector<float> model;
  /// Adam's moments, [inverted parameter][cell] each (zeros for L-BFGS).
  std::vector<float> m, v;
  int parameters = 1;  ///< segments of the model
  int moments = 1;     ///< segments of each moment
  /// L-BFGS's memory, the fields of fwi::LbfgsState; `pairs` < 0 when the file holds none (Adam,
  /// or a checkpoint of format 2).
  struct Lbfgs {
    int pairs = -1;
    std::vector<float> s, y;      ///< [pair][moments x n], oldest first
    std::vector<double> rho;      ///< one per pair
    std::vector<float> gradient;  ///< moments x n values, or empty
    double loss = 0, gamma = 0;
    int iterations = 0, evaluations = 0;
  } lbfgs;
};

/// Writes `c` atomically (temporary file, fsync, rename). Throws ksweep::Error.
void write_checkpoint(std::filesystem::path const& path, Checkpoint const& c);

/// What a checkpoint's header says, read without its arrays: the iteration, the model's cell
/// count and the run identity. The file's size is checked against the header, so that a file
/// that is empty, truncated, padded or of another model is refused before anything large is
/// read. The checksum is verified only by read_checkpoint. Throws ksweep::Error.
struct CheckpointHeader {
  int iteration = 0;
  std::size_t n = 0;  ///< cells
  int parameters = 1, moments = 1;
  int lbfgs_pairs = -1;  ///< L-BFGS pairs held (< 0: no L-BFGS memory in the file)
  nlohmann::json run;
};
CheckpointHeader read_checkpoint_header(std::filesystem::path const& path);

/// Reads and checks a checkpoint for a model of `n` cells (0: as many as it records): format, checksum, ranges
/// (iteration, history, finite and positive model values, finite moments, generator state). Throws ksweep::Error
/// naming `path` and what is wrong.
Checkpoint read_checkpoint(std::filesystem::path const& path, std::size_t n);

/// One key whose value differs between a checkpoint's run and the current one.
struct RunChange {
  std::string key;     ///< "fwi.lr", "data.model_sha256", ...
  std::string before;  ///< in the checkpoint (JSON text)
  std::string after;   ///< now (JSON text)
};

/// The keys of the run identity that may change on --resume (more iterations, figures,
/// checkpoint interval, where the saved steps live).
std::vector<std::string> const& resume_mutable_keys();

/// The keys, other than resume_mutable_keys(), whose values differ between `saved` and `now`
/// (both as in Checkpoint::run), in key order.
std::vector<RunChange> resume_changes(nlohmann::json const& saved, nlohmann::json const& now);

/// The run identity's record of the files a run read ("files": each path-valued key -> path,
/// bytes, modified), for the --resume message; not compared (resume_changes skips "files").
nlohmann::json input_files(Config const& cfg);

/// Throws the --resume message naming every key whose value differs between the checkpoint's
/// run identity `saved` and this run's `now` (keys that may change on --resume excepted), the
/// files whose values changed with their sizes and times then and now.
void require_same_run(nlohmann::json const& saved, nlohmann::json const& now, std::filesystem::path const& checkpoint);

}  // namespace ksweep::io
