#include <ksweep/io/survey.hpp>

#include <ksweep/base/error.hpp>
#include <ksweep/io/atomic_file.hpp>
#include <ksweep/io/config.hpp>
#include <ksweep/io/segy.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace ksweep::io {

void ShotGrouping::add(long long label, Position const& src, Position const& rec, std::string const& where) {
  if (m_labels.empty() || m_labels.back() != label) {
    KSWEEP_REQUIRE(
        std::find(m_labels.begin(), m_labels.end(), label) == m_labels.end(),
        where << ": shot " << label << " continues after other shots: the traces of each shot must be consecutive");
    m_labels.push_back(label);
    m_sources.push_back(src);
    m_spreads.emplace_back();
  }
  KSWEEP_REQUIRE(src == m_sources.back(), where << ": shot " << label
                                                << " has another source position than on its first trace ("
                                                << m_source_fields << ")");
  m_spreads.back().push_back(rec);
}

void ShotGrouping::finish(RecordsFile& r, std::string const& name) const {
  KSWEEP_REQUIRE(!m_spreads.empty(), name << " lists no trace");
  r.shots = static_cast<int>(m_spreads.size());
  r.receivers = 0;
  for (auto const& sp : m_spreads) r.receivers = std::max(r.receivers, static_cast<int>(sp.size()));
  r.src_pos = m_sources;
  r.rec_pos.clear();
  r.rec_count.clear();
  for (auto const& sp : m_spreads) {
    r.rec_count.push_back(static_cast<int>(sp.size()));
    for (int k = 0; k < r.receivers; ++k)
      r.rec_pos.push_back(k < static_cast<int>(sp.size()) ? sp[static_cast<std::size_t>(k)] : sp.back());
  }
}

double inside_model(double metres, double end, std::string const& where, std::string const& field) {
  KSWEEP_REQUIRE(metres >= 0 && (end < 0 || metres <= end * (1 + 1e-12)),
                 where << ": " << field << " = " << metres << " m lies outside the model "
                       << (end < 0 ? std::string("(positions are metres from its origin, >= 0)")
                                   : "[0, " + std::to_string(end) + "] m"));
  return metres;
}

namespace {

std::string trim(std::string const& s) {
  auto const b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

std::vector<std::string> split(std::string const& line) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, ',')) out.push_back(trim(cell));
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

/// `text` as a number, whole: a leading '+' is allowed (as strtod allows it; from_chars does not).
template <class T>
bool parse(std::string const& text, T& value) {
  std::size_t const skip = text.size() > 1 && text[0] == '+' && text[1] != '-' && text[1] != '+' ? 1 : 0;
  auto const* end = text.data() + text.size();
  auto const [p, ec] = std::from_chars(text.data() + skip, end, value);
  return ec == std::errc() && p == end && text.size() > skip;
}

RecordsFile read_csv(std::filesystem::path const& path, double dh, bool three,
                     std::optional<Position> const& model_end) {
  std::string const name = "survey file " + shown_path(path);
  std::ifstream in(path);
  KSWEEP_REQUIRE(in.good(), "cannot open " << name);
  std::vector<std::string> const needed =
      three ? std::vector<std::string>{"shot", "src_x", "src_y", "src_z", "rec_x", "rec_y", "rec_z"}
            : std::vector<std::string>{"shot", "src_x", "src_z", "rec_x", "rec_z"};
  std::string line;
  int line_no = 0;
  std::map<std::string, std::size_t> column;
  std::size_t n_columns = 0;
  RecordsFile r;
  r.dh = dh;
  r.ny = three ? 1 : 0;
  ShotGrouping shots(three ? "src_x, src_y, src_z" : "src_x, src_z");
  while (std::getline(in, line)) {
    ++line_no;
    // A UTF-8 byte-order mark (spreadsheets write one) before the header is not part of it.
    if (line_no == 1 && line.compare(0, 3, "\xef\xbb\xbf") == 0) line.erase(0, 3);
    std::string const t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    auto const cells = split(t);
    if (column.empty()) {  // the header
      for (std::size_t i = 0; i < cells.size(); ++i) {
        KSWEEP_REQUIRE(column.count(cells[i]) == 0, name << ", line " << line_no << ": column '" << shown(cells[i])
                                                         << "' appears twice in the header");
        column[cells[i]] = i;
      }
      for (auto const& c : cells)
        KSWEEP_REQUIRE(
            std::find(needed.begin(), needed.end(), c) != needed.end(),
            name << ", line " << line_no << ": unknown column '" << shown(c) << "' in the header (the columns of a "
                 << (three ? "3D" : "2D") << " survey: " <<
                [&] {
                  std::string s;
                  for (auto const& n : needed) s += (s.empty() ? "" : ",") + n;
                  return s;
                }()
                 << ")");
      for (auto const& c : needed)
        KSWEEP_REQUIRE(column.count(c), name << ", line " << line_no << ": the header has no column '" << c
                                             << "' (needed for a " << (three ? "3D" : "2D") << " survey)");
      n_columns = cells.size();
      continue;
    }
    KSWEEP_REQUIRE(cells.size() == n_columns, name << ", line " << line_no << " has " << cells.size()
                                                   << " values, the header names " << n_columns << " columns");
    long long label = 0;
    KSWEEP_REQUIRE(parse(cells[column["shot"]], label), name << ", line " << line_no << ": shot = '"
                                                             << shown(cells[column["shot"]]) << "' is not an integer");
    std::string const where = name + ", line " + std::to_string(line_no);
    auto value = [&](char const* key, double end) {
      double v = 0;
      std::string const& text = cells[column[key]];
      KSWEEP_REQUIRE(parse(text, v) && std::isfinite(v),
                     where << ": " << key << " = '" << shown(text) << "' is not a finite number");
      return inside_model(v, end, where, key);
    };
    double const ez = model_end ? model_end->z : -1, ex = model_end ? model_end->x : -1,
                 ey = model_end ? model_end->y : -1;
    Position const src{value("src_z", ez), value("src_x", ex), three ? value("src_y", ey) : 0.0};
    Position const rec{value("rec_z", ez), value("rec_x", ex), three ? value("rec_y", ey) : 0.0};
    shots.add(label, src, rec, where);
  }
  KSWEEP_REQUIRE(!in.bad(), "cannot read " << name);
  shots.finish(r, name);
  return r;
}

}  // namespace

RecordsFile read_survey(std::filesystem::path const& path, double dh, bool three,
                        std::optional<Position> const& model_end) {
  if (is_segy_path(path)) {
    return read_records_segy(path, dh, three ? 1 : 0, false, model_end);
  }
  return read_csv(path, dh, three, model_end);
}

void write_survey_csv(std::filesystem::path const& path, RecordsFile const& r) {
  bool const three = r.ny > 0;
  std::ostringstream out;
  out.precision(17);
  out << (three ? "shot,src_x,src_y,src_z,rec_x,rec_y,rec_z\n" : "shot,src_x,src_z,rec_x,rec_z\n");
  for (int s = 0; s < r.shots; ++s) {
    Position const& p = r.src_pos[static_cast<std::size_t>(s)];
    for (int k = 0; k < r.rec_count[static_cast<std::size_t>(s)]; ++k) {
      Position const& g = r.rec_pos[static_cast<std::size_t>(s) * r.receivers + k];
      out << s + 1 << ',' << p.x << ',';
      if (three) out << p.y << ',';
      out << p.z << ',' << g.x << ',';
      if (three) out << g.y << ',';
      out << g.z << '\n';
    }
  }
  write_file_atomic(path, out.str());
}

}  // namespace ksweep::io
