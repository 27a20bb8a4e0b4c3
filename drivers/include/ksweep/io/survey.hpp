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

namespace ksweep::io {

/// The geometry of the survey in `path` (CSV, or SEG-Y when is_segy_path): the RecordsFile's
/// shots, receivers, src_pos, rec_pos and rec_count (no samples; dh as given, ny 1 in 3D, 0 in 2D). `three`: a 3D
/// model (the y columns are required; in 2D they are refused). With `model_end` (the model's far
/// corner in metres), a position outside the model is an error naming the file, the line (or
/// trace) and the column. Throws ksweep::Error.
RecordsFile read_survey(std::filesystem::path const& path, double dh, bool three,
                        std::optional<Position> const& model_end = std::nullopt);

/// Writes the geometry of `records` as the CSV above (the shots labelled 1, 2, ...), atomically.
void write_survey_csv(std::filesystem::path const& path, RecordsFile const& records);

}  // namespace ksweep::io
