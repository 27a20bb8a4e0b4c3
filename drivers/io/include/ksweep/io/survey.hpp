#pragma once
/// \file survey.hpp
/// Acquisition surveys from files (`[survey] file`): a CSV table of traces, or a SEG-Y file's
/// trace headers (segy.hpp). A survey is a list of shots, each with one source and its own
/// receivers, positions in metres from the model's origin (z down, x, y across).
///
/// CSV: a header line naming the columns, then one row per trace:
///   shot,src_x,src_z,rec_x,rec_z               (2D)
///   shot,src_x,src_y,src_z,rec_x,rec_y,rec_z   (3D)
/// in any column order. `shot` is an integer label; the rows of a shot are consecutive and
/// share one source position; the receivers of a shot are its rows, in file order. Blank lines
/// and lines starting with '#' are skipped.

#include <ksweep/io/hdf5_io.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ksweep::io {

/// The geometry of the survey in `path` (CSV, or SEG-Y when is_segy_path): the RecordsFile's
/// shots, receivers, src_pos, rec_pos and rec_count (no samples; dh as given, ny 1 in 3D, 0 in 2D). `three`: a 3D
/// model (the y columns are required; in 2D they are refused). With `model_end` (the model's far
/// corner in metres), a position outside the model is an error naming the file, the line (or
/// trace) and the column. Throws ksweep::Error.
RecordsFile read_survey(std::filesystem::path const& path, double dh, bool three,
                        std::optional<Position> const& model_end = std::nullopt);

/// Traces in file order into shots, as CSV rows and SEG-Y traces are read: the consecutive
/// traces of one shot label make a shot with one source position and its receivers in order.
class ShotGrouping {
 public:
  /// `source_fields` names where a trace keeps its source position, for errors ("src_x, src_z",
  /// "bytes 49, 73, 77").
  explicit ShotGrouping(std::string source_fields) : m_source_fields(std::move(source_fields)) {}
  /// Adds a trace; `where` names it in errors ("survey file F, line 5").
  void add(long long label, Position const& src, Position const& rec, std::string const& where);
  /// The shot (0-based) of the trace added last.
  int current() const { return static_cast<int>(m_spreads.size()) - 1; }
  /// Sets the geometry of `r` (shots, receivers: the most any shot has, src_pos, rec_pos padded
  /// with each shot's last receiver, rec_count); `name` names the file when it holds no trace.
  void finish(RecordsFile& r, std::string const& name) const;

 private:
  std::string m_source_fields;
  std::vector<long long> m_labels;
  std::vector<Position> m_sources;
  std::vector<std::vector<Position>> m_spreads;
};

/// `metres` when it lies in [0, end] (end < 0: unknown, [0, inf)); else an error naming `where`
/// and `field`.
double inside_model(double metres, double end, std::string const& where, std::string const& field);

/// Writes the geometry of `records` as the CSV above (the shots labelled 1, 2, ...), atomically.
void write_survey_csv(std::filesystem::path const& path, RecordsFile const& records);

}  // namespace ksweep::io
