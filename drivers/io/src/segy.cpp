#include <ksweep/io/segy.hpp>

#include <ksweep/base/error.hpp>
#include <ksweep/io/atomic_file.hpp>
#include <ksweep/io/config.hpp>
#include <ksweep/io/survey.hpp>

#include <segyio/segy.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace ksweep::io {

namespace fs = std::filesystem;

namespace {

constexpr int kTextHeaderBytes = 3200;
constexpr int kBinaryHeaderBytes = 400;
constexpr int kTraceHeaderBytes = 240;
constexpr int kScalar = -1000;  // coordinates and depths written in millimetres

struct Closer {
  void operator()(segy_file* f) const {
    if (f != nullptr) segy_close(f);
  }
};
using File = std::unique_ptr<segy_file, Closer>;

char const* segy_error_name(int err) {
  switch (err) {
    case SEGY_FOPEN_ERROR:
      return "cannot open";
    case SEGY_FSEEK_ERROR:
      return "seek failed";
    case SEGY_FREAD_ERROR:
      return "read failed (the file ends early)";
    case SEGY_FWRITE_ERROR:
      return "write failed";
    case SEGY_INVALID_FIELD:
      return "invalid header field";
    case SEGY_TRACE_SIZE_MISMATCH:
      return "the file size is not a whole number of traces";
    case SEGY_INVALID_ARGS:
      return "invalid arguments";
    default:
      return "error";
  }
}

char const* format_name(int code) {
  switch (code) {
    case 1:
      return "4-byte IBM float";
    case 2:
      return "4-byte signed integer";
    case 3:
      return "2-byte signed integer";
    case 4:
      return "4-byte fixed point with gain";
    case 5:
      return "4-byte IEEE float";
    case 6:
      return "8-byte IEEE float";
    case 8:
      return "1-byte signed integer";
    default:
      return "not a SEG-Y format code";
  }
}

std::int32_t field(char const* header, int byte) {
  std::int32_t v = 0;
  segy_get_field(header, byte, &v);
  return v;
}

std::int32_t bfield(char const* header, int byte) {
  std::int32_t v = 0;
  segy_get_bfield(header, byte, &v);
  return v;
}

/// SEG-Y rev 1 scalar: s > 0 multiplies, s < 0 divides by |s|, 0 is 1.
double apply_scalar(std::int32_t value, std::int32_t scalar) {
  if (scalar > 0) return static_cast<double>(value) * scalar;
  if (scalar < 0) return static_cast<double>(value) / -static_cast<double>(scalar);
  return static_cast<double>(value);
}

/// A big-endian IBM float decoded exactly into a double: (-1)^s 0.f 16^(e - 64).
double ibm_to_double(unsigned char const* b) {
  std::uint32_t const u = (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) | b[3];
  double const mag = std::ldexp(static_cast<double>(u & 0xffffffu), 4 * static_cast<int>((u >> 24) & 0x7fu) - 256 - 24);
  return (u >> 31) != 0 ? -mag : mag;
}

/// "model.source = PATH" for a configuration key, "SEG-Y file PATH" otherwise.
std::string label(std::string const& what, fs::path const& path) {
  return what + (what.find('.') != std::string::npos ? " = " : " ") + shown_path(path);
}

struct Opened {
  File file;
  SegyLayout layout;
  long trace0 = 0;
  int trace_bytes = 0;
};

Opened open_segy(fs::path const& path, std::string const& what) {
  std::string const name = label(what, path);
  std::error_code ec;
  KSWEEP_REQUIRE(fs::exists(path, ec), name << ": file not found");
  KSWEEP_REQUIRE(fs::is_regular_file(path, ec), name << " is not a regular file (a folder, device or pipe)");
  auto const size = fs::file_size(path, ec);
  KSWEEP_REQUIRE(!ec && size >= static_cast<std::uintmax_t>(kTextHeaderBytes + kBinaryHeaderBytes),
                 name << " has " << size << " bytes, fewer than the " << kTextHeaderBytes + kBinaryHeaderBytes
                      << " bytes of the SEG-Y textual and binary headers: not a SEG-Y file, or truncated");
  Opened o;
  o.file.reset(segy_open(path.c_str(), "rb"));
  KSWEEP_REQUIRE(o.file != nullptr, name << ": cannot open: " << std::strerror(errno));
  char bin[kBinaryHeaderBytes];
  int err = segy_binheader(o.file.get(), bin);
  KSWEEP_REQUIRE(err == SEGY_OK, name << ": cannot read the binary header: " << segy_error_name(err));
  // The format code tells the byte order: a little-endian file's code reads as code << 8.
  std::int32_t code = bfield(bin, SEGY_BIN_FORMAT);
  bool lsb = false;
  if ((code < 1 || code > 16) && (code & 0xff) == 0 && (code >> 8) >= 1 && (code >> 8) <= 16) {
    lsb = true;
    code >>= 8;
  }
  KSWEEP_REQUIRE(code == SEGY_IBM_FLOAT_4_BYTE || code == SEGY_IEEE_FLOAT_4_BYTE,
                 name << ": binary header byte 3225 (format code) is " << code << " (" << format_name(code)
                      << "); ksweep reads 1 (4-byte IBM float) and 5 (4-byte IEEE float), in either byte order");
  err = segy_set_format(o.file.get(), code | (lsb ? SEGY_LSB : SEGY_MSB));
  KSWEEP_REQUIRE(err == SEGY_OK, name << ": cannot set format " << code << ": " << segy_error_name(err));
  if (lsb) {  // read again: segyio now returns the header in big-endian order
    err = segy_binheader(o.file.get(), bin);
    KSWEEP_REQUIRE(err == SEGY_OK, name << ": cannot read the binary header: " << segy_error_name(err));
  }
  o.layout.format = code;
  o.layout.little_endian = lsb;
  o.trace0 = segy_trace0(bin);
  KSWEEP_REQUIRE(o.trace0 >= kTextHeaderBytes + kBinaryHeaderBytes,
                 name << ": binary header byte 3505 (extended textual headers) is " << bfield(bin, SEGY_BIN_EXT_HEADERS)
                      << ", which is not a count of headers");
  int samples = segy_samples(bin);
  char th[kTraceHeaderBytes];
  if (samples <= 0 && size >= static_cast<std::uintmax_t>(o.trace0 + kTraceHeaderBytes)) {
    // Binary header without a sample count: the first trace's byte 115.
    err = segy_traceheader(o.file.get(), 0, th, o.trace0, 0);
    if (err == SEGY_OK) samples = field(th, SEGY_TR_SAMPLE_COUNT);
  }
  KSWEEP_REQUIRE(samples >= 1, name << ": binary header byte 3221 (samples per trace) is "
                                    << bfield(bin, SEGY_BIN_SAMPLES)
                                    << " and the first trace's byte 115 gives no count either");
  o.layout.samples = samples;
  o.trace_bytes = segy_trsize(code, samples);
  std::uintmax_t const per_trace = static_cast<std::uintmax_t>(kTraceHeaderBytes + o.trace_bytes);
  std::uintmax_t const body = size - static_cast<std::uintmax_t>(o.trace0);
  KSWEEP_REQUIRE(size > static_cast<std::uintmax_t>(o.trace0) && body % per_trace == 0,
                 name << " has " << size << " bytes: after its " << o.trace0 << " bytes of headers, "
                      << (size > static_cast<std::uintmax_t>(o.trace0) ? body : 0)
                      << " bytes are not a whole number of " << per_trace << "-byte traces (240-byte header + "
                      << samples
                      << " samples x 4 bytes, the sample count of binary header byte 3221): the file is truncated or "
                         "its sample count is wrong");
  KSWEEP_REQUIRE(body / per_trace <= static_cast<std::uintmax_t>(std::numeric_limits<int>::max()),
                 name << " has " << body / per_trace << " traces, more than " << std::numeric_limits<int>::max());
  o.layout.traces = static_cast<int>(body / per_trace);
  double dt_us = bfield(bin, SEGY_BIN_INTERVAL);
  if (dt_us <= 0 && segy_traceheader(o.file.get(), 0, th, o.trace0, o.trace_bytes) == SEGY_OK)
    dt_us = field(th, SEGY_TR_SAMPLE_INTER);
  o.layout.dt = dt_us > 0 ? dt_us * 1e-6 : 0.0;
  return o;
}

/// Reads trace `i`'s header, checking its sample count.
void trace_header(Opened& o, int i, char* th, std::string const& name) {
  int const err = segy_traceheader(o.file.get(), i, th, o.trace0, o.trace_bytes);
  KSWEEP_REQUIRE(err == SEGY_OK, name << ": cannot read the header of trace " << i + 1 << ": " << segy_error_name(err));
  std::int32_t const ns = field(th, SEGY_TR_SAMPLE_COUNT);
  KSWEEP_REQUIRE(ns == 0 || ns == o.layout.samples,
                 name << ": trace " << i + 1 << " has byte 115 (samples in this trace) = " << ns
                      << ", the binary header says " << o.layout.samples
                      << " samples per trace; ksweep reads fixed-length traces only");
}

/// Reads trace `i`'s samples as doubles (exact for both formats).
void trace_values(Opened& o, int i, std::vector<unsigned char>& raw, std::vector<double>& out,
                  std::string const& name) {
  int const n = o.layout.samples;
  raw.resize(static_cast<std::size_t>(o.trace_bytes));
  out.resize(static_cast<std::size_t>(n));
  int const err = segy_readtrace(o.file.get(), i, raw.data(), o.trace0, o.trace_bytes);
  KSWEEP_REQUIRE(err == SEGY_OK,
                 name << ": cannot read the samples of trace " << i + 1 << ": " << segy_error_name(err));
  if (o.layout.format == SEGY_IBM_FLOAT_4_BYTE) {
    for (int k = 0; k < n; ++k) out[static_cast<std::size_t>(k)] = ibm_to_double(raw.data() + 4 * k);
  } else {
    segy_to_native(SEGY_IEEE_FLOAT_4_BYTE, n, raw.data());
    for (int k = 0; k < n; ++k) {
      float f;
      std::memcpy(&f, raw.data() + 4 * k, sizeof f);
      out[static_cast<std::size_t>(k)] = f;
    }
  }
}

/// Writes SEG-Y with segyio into `path.tmp`, flushes it and renames it over `path`.
class Writer {
 public:
  Writer(fs::path path, int samples, double dt_us, bool little_endian, std::string const& text)
      : m_path(std::move(path)), m_tmp(m_path.string() + ".tmp"), m_samples(samples) {
    check_injected_write_fault(m_path);
    m_file.reset(segy_open(m_tmp.c_str(), "w+b"));
    KSWEEP_REQUIRE(m_file != nullptr, "cannot write " << shown_path(m_path) << ": " << describe_errno(errno));
    std::string t(kTextHeaderBytes, ' ');
    std::istringstream lines(text);
    std::string line;
    for (int row = 0; row < 40 && std::getline(lines, line); ++row) {
      std::string card = "C" + std::string(row + 1 < 10 ? " " : "") + std::to_string(row + 1) + " " + line;
      card.resize(80, ' ');
      t.replace(static_cast<std::size_t>(row) * 80, 80, card);
    }
    check(segy_write_textheader(m_file.get(), 0, t.c_str()), "the textual header");
    char bin[kBinaryHeaderBytes] = {};
    segy_set_bfield(bin, SEGY_BIN_INTERVAL, static_cast<std::int32_t>(std::lround(dt_us)));
    segy_set_bfield(bin, SEGY_BIN_SAMPLES, samples);
    segy_set_bfield(bin, SEGY_BIN_FORMAT, SEGY_IEEE_FLOAT_4_BYTE);
    segy_set_bfield(bin, SEGY_BIN_MEASUREMENT_SYSTEM, 1);
    segy_set_bfield(bin, SEGY_BIN_SEGY_REVISION, 0x0100);
    segy_set_bfield(bin, SEGY_BIN_TRACE_FLAG, 1);
    // With SEGY_LSB segyio byte-swaps every header and sample it writes.
    check(segy_set_format(m_file.get(), SEGY_IEEE_FLOAT_4_BYTE | (little_endian ? SEGY_LSB : SEGY_MSB)), "the format");
    check(segy_write_binheader(m_file.get(), bin), "the binary header");
    m_trace_bytes = segy_trsize(SEGY_IEEE_FLOAT_4_BYTE, samples);
    m_header.assign(kTraceHeaderBytes, 0);
    m_samples_raw.resize(static_cast<std::size_t>(m_trace_bytes));
    segy_set_field(m_header.data(), SEGY_TR_SAMPLE_COUNT, samples);
    segy_set_field(m_header.data(), SEGY_TR_SAMPLE_INTER, static_cast<std::int32_t>(std::lround(dt_us)));
    segy_set_field(m_header.data(), SEGY_TR_TRACE_ID, 1);
    segy_set_field(m_header.data(), SEGY_TR_ELEV_SCALAR, kScalar);
    segy_set_field(m_header.data(), SEGY_TR_SOURCE_GROUP_SCALAR, kScalar);
    segy_set_field(m_header.data(), SEGY_TR_COORD_UNITS, 1);
  }
  ~Writer() {
    m_file.reset();
    if (!m_done) {
      std::error_code ec;
      fs::remove(m_tmp, ec);
    }
  }
  Writer(Writer const&) = delete;
  Writer& operator=(Writer const&) = delete;

  char* header() { return m_header.data(); }
  void trace(float const* values, std::size_t stride) {
    for (int k = 0; k < m_samples; ++k)
      std::memcpy(m_samples_raw.data() + 4 * k, values + static_cast<std::size_t>(k) * stride, 4);
    segy_set_field(m_header.data(), SEGY_TR_SEQ_LINE, m_traces + 1);
    segy_set_field(m_header.data(), SEGY_TR_SEQ_FILE, m_traces + 1);
    check(segy_write_traceheader(m_file.get(), m_traces, m_header.data(), kTextHeaderBytes + kBinaryHeaderBytes,
                                 m_trace_bytes),
          "a trace header");
    segy_from_native(SEGY_IEEE_FLOAT_4_BYTE, m_samples, m_samples_raw.data());
    check(segy_writetrace(m_file.get(), m_traces, m_samples_raw.data(), kTextHeaderBytes + kBinaryHeaderBytes,
                          m_trace_bytes),
          "a trace");
    ++m_traces;
  }
  void finish() {
    check(segy_flush(m_file.get(), false), "the file");
    m_file.reset();
    int const fd = ::open(m_tmp.c_str(), O_RDONLY | O_CLOEXEC);
    KSWEEP_REQUIRE(fd >= 0 && ::fsync(fd) == 0, "cannot write " << shown_path(m_path) << ": " << describe_errno(errno));
    ::close(fd);
    std::error_code ec;
    fs::rename(m_tmp, m_path, ec);
    KSWEEP_REQUIRE(!ec, "cannot write " << shown_path(m_path) << ": renaming the temporary file: " << ec.message());
    m_done = true;
  }

 private:
  void check(int err, char const* what) {
    int const saved = errno;
    KSWEEP_REQUIRE(err == SEGY_OK, "cannot write " << shown_path(m_path) << ": writing " << what << ": "
                                                   << segy_error_name(err)
                                                   << (saved != 0 ? " (" + describe_errno(saved) + ")" : ""));
  }

  fs::path m_path, m_tmp;
  File m_file;
  int m_samples = 0, m_trace_bytes = 0, m_traces = 0;
  std::vector<char> m_header;
  std::vector<unsigned char> m_samples_raw;
  bool m_done = false;
};

std::int32_t scaled(double metres, char const* what, fs::path const& path) {
  double const v = std::round(metres * -kScalar);
  KSWEEP_REQUIRE(std::abs(v) <= std::numeric_limits<std::int32_t>::max(),
                 "cannot write " << shown_path(path) << ": " << what << " = " << metres
                                 << " m does not fit a SEG-Y coordinate field in millimetres");
  return static_cast<std::int32_t>(v);
}

/// ksweep's cards of the textual header (each fits the 76 characters a card holds after
/// "C NN "): "ksweep wavelet freq=.. delay=.." and "ksweep grid order=.. nz=.. nx=.. ny=.. dh=..".
std::string records_text(RecordsFile const& r) {
  std::ostringstream os;
  os.precision(17);
  os << "ksweep shot gathers (SEG-Y rev 1, IEEE float, coordinates in mm from the model origin)\n"
     << "ksweep wavelet freq=" << r.freq << " delay=" << r.delay << "\n"
     << "ksweep grid order=" << r.order << " nz=" << r.nz << " nx=" << r.nx << " ny=" << r.ny << " dh=" << r.dh << "\n"
     << "fldr (9) = shot, tracf (13) = receiver, sx/sy/gx/gy (73-88) and sdepth (49), -gelev (41)\n"
     << "scaled by scalco (71) and scalel (69) = -1000; ns (115), dt (117) in microseconds\n";
  return os.str();
}

void parse_records_text(std::string const& text, RecordsFile& r) {
  for (std::size_t card = 0; card + 80 <= text.size(); card += 80) {
    std::string const line = text.substr(card, 80);
    std::size_t at = line.find("ksweep wavelet ");
    if (at == std::string::npos) at = line.find("ksweep grid ");
    if (at == std::string::npos) continue;
    std::istringstream is(line.substr(at));
    std::string item;
    while (is >> item) {
      auto const eq = item.find('=');
      if (eq == std::string::npos) continue;
      std::string const key = item.substr(0, eq);
      char* end = nullptr;
      double const v = std::strtod(item.c_str() + eq + 1, &end);
      if (end == item.c_str() + eq + 1) continue;
      if (key == "freq") r.freq = v;
      else if (key == "delay") r.delay = v;
      else if (key == "order") r.order = static_cast<int>(v);
      else if (key == "nz") r.nz = static_cast<int>(v);
      else if (key == "nx") r.nx = static_cast<int>(v);
    }
  }
}

}  // namespace

bool is_segy_path(fs::path const& path) {
  std::string const ext = lower_extension(path);
  return ext == ".sgy" || ext == ".segy";
}

SegyLayout segy_layout(fs::path const& path, std::string const& what) { return open_segy(path, what).layout; }

std::vector<double> read_segy_trace(fs::path const& path, double& dt, std::string const& what) {
  Opened o = open_segy(path, what);
  std::string const name = label(what, path);
  char th[kTraceHeaderBytes];
  std::vector<unsigned char> raw;
  std::vector<double> v;
  trace_header(o, 0, th, name);
  trace_values(o, 0, raw, v, name);
  dt = o.layout.dt;
  return v;
}

namespace {

/// Where each trace of a model goes: 2D (one trace per x position, in file order) unless the
/// traces span more than one inline (byte 189) and more than one crossline (byte 193); then 3D,
/// inlines along y and crosslines along x, each (inline, crossline) exactly once.
struct ModelTraces {
  int ny = 0, nx = 0;
  std::vector<std::size_t> column;  ///< [trace]: iy nx + ix
};

ModelTraces model_traces(Opened& o, std::string const& name) {
  int const n = o.layout.traces;
  std::vector<std::int32_t> il(static_cast<std::size_t>(n)), xl(static_cast<std::size_t>(n));
  char th[kTraceHeaderBytes];
  for (int i = 0; i < n; ++i) {
    trace_header(o, i, th, name);
    il[static_cast<std::size_t>(i)] = field(th, SEGY_TR_INLINE);
    xl[static_cast<std::size_t>(i)] = field(th, SEGY_TR_CROSSLINE);
  }
  auto distinct = [](std::vector<std::int32_t> v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
  };
  auto const ils = distinct(il), xls = distinct(xl);
  ModelTraces t;
  if (ils.size() < 2 || xls.size() < 2) {  // 2D
    t.nx = n;
    t.column.resize(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) t.column[static_cast<std::size_t>(i)] = static_cast<std::size_t>(i);
    return t;
  }
  t.ny = static_cast<int>(ils.size());
  t.nx = static_cast<int>(xls.size());
  KSWEEP_REQUIRE(static_cast<long long>(t.ny) * t.nx == n,
                 name << " has " << n << " traces over " << t.ny << " inlines (byte 189: " << ils.front() << " to "
                      << ils.back() << ") and " << t.nx << " crosslines (byte 193: " << xls.front() << " to "
                      << xls.back() << "): a 3D model needs one trace at every (inline, crossline), " << t.ny * t.nx
                      << " in all");
  std::vector<int> seen(static_cast<std::size_t>(n), -1);
  t.column.resize(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    auto const iy = static_cast<std::size_t>(std::lower_bound(ils.begin(), ils.end(), il[static_cast<std::size_t>(i)]) -
                                             ils.begin());
    auto const ix = static_cast<std::size_t>(std::lower_bound(xls.begin(), xls.end(), xl[static_cast<std::size_t>(i)]) -
                                             xls.begin());
    std::size_t const c = iy * static_cast<std::size_t>(t.nx) + ix;
    KSWEEP_REQUIRE(seen[c] < 0, name << ": trace " << i + 1 << " has (inline, crossline) = ("
                                     << il[static_cast<std::size_t>(i)] << ", " << xl[static_cast<std::size_t>(i)]
                                     << ") (bytes 189, 193), as trace " << seen[c] + 1
                                     << " has: a 3D model needs each once");
    seen[c] = i;
    t.column[static_cast<std::size_t>(i)] = c;
  }
  return t;
}

}  // namespace

SegyModelShape segy_model_shape(fs::path const& path, std::string const& what) {
  Opened o = open_segy(path, what);
  auto const t = model_traces(o, label(what, path));
  return {o.layout.samples, t.ny, t.nx};
}

VelocityModel read_segy_model(fs::path const& path, double dh, double scale, std::string const& what) {
  Opened o = open_segy(path, what);
  std::string const name = label(what, path);
  auto const t = model_traces(o, name);
  VelocityModel m;
  m.nz = o.layout.samples;
  m.ny = t.ny;
  m.nx = t.nx;
  m.dh = dh;
  m.description = path.string();
  std::size_t const plane = static_cast<std::size_t>(m.ny > 0 ? m.ny : 1) * static_cast<std::size_t>(m.nx);
  m.vp.resize(static_cast<std::size_t>(m.nz) * plane);
  std::vector<unsigned char> raw;
  std::vector<double> v;
  for (int i = 0; i < o.layout.traces; ++i) {
    trace_values(o, i, raw, v, name);
    std::size_t const c = t.column[static_cast<std::size_t>(i)];
    for (int iz = 0; iz < m.nz; ++iz)
      m.vp[static_cast<std::size_t>(iz) * plane + c] = static_cast<float>(v[static_cast<std::size_t>(iz)] * scale);
  }
  return m;
}

void write_segy_model(fs::path const& path, std::vector<float> const& values, int nz, int nx, double dh, int ny) {
  std::size_t const plane = static_cast<std::size_t>(ny > 0 ? ny : 1) * static_cast<std::size_t>(nx);
  KSWEEP_REQUIRE(nz >= 1 && nx >= 1 && ny >= 0 && values.size() == static_cast<std::size_t>(nz) * plane,
                 "cannot write " << shown_path(path) << ": a model of " << values.size() << " values is not " << nz
                                 << (ny > 0 ? " x " + std::to_string(ny) : std::string()) << " x " << nx);
  std::ostringstream text;
  text << "ksweep model (SEG-Y rev 1, IEEE float): one trace per "
       << (ny > 0 ? "(y, x) column, inline (189) = iy + 1, crossline (193) = ix + 1" : "x position")
       << ", samples along depth\n"
       << "ksweep model nz=" << nz << (ny > 0 ? " ny=" + std::to_string(ny) : std::string()) << " nx=" << nx
       << " dh=" << dh << " (cdp x (181), cdp y (185) and gx (81) in mm)\n";
  Writer w(path, nz, dh * 1000.0, false, text.str());
  for (int iy = 0; iy < (ny > 0 ? ny : 1); ++iy)
    for (int ix = 0; ix < nx; ++ix) {
      std::int32_t const x = scaled(ix * dh, "x", path);
      segy_set_field(w.header(), SEGY_TR_CDP_X, x);
      segy_set_field(w.header(), SEGY_TR_GROUP_X, x);
      segy_set_field(w.header(), SEGY_TR_SOURCE_X, x);
      segy_set_field(w.header(), SEGY_TR_ENSEMBLE, iy * nx + ix + 1);
      if (ny > 0) {
        segy_set_field(w.header(), SEGY_TR_CDP_Y, scaled(iy * dh, "y", path));
        segy_set_field(w.header(), SEGY_TR_INLINE, iy + 1);
        segy_set_field(w.header(), SEGY_TR_CROSSLINE, ix + 1);
      }
      w.trace(
          values.data() + static_cast<std::size_t>(iy) * static_cast<std::size_t>(nx) + static_cast<std::size_t>(ix),
          plane);
    }
  w.finish();
}

void write_records_segy(fs::path const& path, RecordsFile const& r, bool little_endian) {
  KSWEEP_REQUIRE(r.shots >= 1 && r.nt >= 1 && r.receivers >= 1 && r.dh > 0 && r.dt > 0,
                 "cannot write " << shown_path(path) << ": records of shots = " << r.shots << ", nt = " << r.nt
                                 << ", receivers = " << r.receivers << ", dh = " << r.dh << ", dt = " << r.dt);
  KSWEEP_REQUIRE(r.nt <= 32767 && r.dt * 1e6 <= 32767,
                 "cannot write " << shown_path(path) << ": SEG-Y rev 1 holds at most 32767 samples of at most 32767 "
                                 << "microseconds per trace (the records have " << r.nt << " samples of " << r.dt * 1e6
                                 << " us)");
  std::size_t const n =
      static_cast<std::size_t>(r.shots) * static_cast<std::size_t>(r.nt) * static_cast<std::size_t>(r.receivers);
  KSWEEP_REQUIRE(r.data.size() == n,
                 "cannot write " << shown_path(path) << ": " << r.data.size() << " samples for records of " << n);
  bool const three = r.ny > 0;
  Writer w(path, r.nt, r.dt * 1e6, little_endian, records_text(r));
  for (int s = 0; s < r.shots; ++s) {
    Position const& src = r.src_pos[static_cast<std::size_t>(s)];
    segy_set_field(w.header(), SEGY_TR_FIELD_RECORD, s + 1);
    segy_set_field(w.header(), SEGY_TR_ENERGY_SOURCE_POINT, s + 1);
    segy_set_field(w.header(), SEGY_TR_SOURCE_X, scaled(src.x, "source x", path));
    segy_set_field(w.header(), SEGY_TR_SOURCE_Y, scaled(three ? src.y : 0.0, "source y", path));
    segy_set_field(w.header(), SEGY_TR_SOURCE_DEPTH, scaled(src.z, "source depth", path));
    for (int k = 0; k < r.rec_count[static_cast<std::size_t>(s)]; ++k) {
      Position const& g = r.rec_pos[static_cast<std::size_t>(s) * r.receivers + k];
      segy_set_field(w.header(), SEGY_TR_NUMBER_ORIG_FIELD, k + 1);
      segy_set_field(w.header(), SEGY_TR_GROUP_X, scaled(g.x, "receiver x", path));
      segy_set_field(w.header(), SEGY_TR_GROUP_Y, scaled(three ? g.y : 0.0, "receiver y", path));
      segy_set_field(w.header(), SEGY_TR_RECV_GROUP_ELEV, scaled(-g.z, "receiver depth", path));
      segy_set_field(w.header(), SEGY_TR_OFFSET, static_cast<std::int32_t>(std::lround(g.x - src.x)));
      w.trace(r.data.data() + static_cast<std::size_t>(s) * r.nt * r.receivers + k,
              static_cast<std::size_t>(r.receivers));
    }
  }
  w.finish();
}

RecordsFile read_records_segy(fs::path const& path, double dh, int ny, bool values,
                              std::optional<Position> const& model_end) {
  std::string const what = "SEG-Y file";
  std::string const name = what + " " + shown_path(path);
  Opened o = open_segy(path, what);
  RecordsFile r;
  r.nt = o.layout.samples;
  r.dt = o.layout.dt;
  r.dh = dh;
  r.ny = ny;
  r.freq = std::numeric_limits<double>::quiet_NaN();
  r.delay = std::numeric_limits<double>::quiet_NaN();
  KSWEEP_REQUIRE(r.dt > 0, name << ": neither binary header byte 3217 nor the first trace's byte 117 gives a sample "
                                   "interval");
  {
    char text[SEGY_TEXT_HEADER_SIZE + 1] = {};
    if (segy_read_textheader(o.file.get(), text) == SEGY_OK) parse_records_text(text, r);
  }
  bool const three = ny > 0;
  double const end_z = model_end ? model_end->z : -1, end_x = model_end ? model_end->x : -1,
               end_y = model_end ? model_end->y : -1;
  std::vector<int> shot_of_trace(static_cast<std::size_t>(o.layout.traces));
  std::vector<int> first_trace;  // [shot]
  ShotGrouping shots("bytes 49, 73, 77");
  char th[kTraceHeaderBytes];
  for (int i = 0; i < o.layout.traces; ++i) {
    trace_header(o, i, th, name);
    std::string const where = name + ": trace " + std::to_string(i + 1);
    std::int32_t const scalco = field(th, SEGY_TR_SOURCE_GROUP_SCALAR), scalel = field(th, SEGY_TR_ELEV_SCALAR);
    auto at = [&](int f, std::int32_t scalar, double sign, char const* header, double end) {
      return inside_model(sign * apply_scalar(field(th, f), scalar), end, where, header);
    };
    Position const src{at(SEGY_TR_SOURCE_DEPTH, scalel, 1, "sdepth (byte 49)", end_z),
                       at(SEGY_TR_SOURCE_X, scalco, 1, "sx (byte 73)", end_x),
                       three ? at(SEGY_TR_SOURCE_Y, scalco, 1, "sy (byte 77)", end_y) : 0.0};
    Position const rec{at(SEGY_TR_RECV_GROUP_ELEV, scalel, -1, "-gelev (byte 41)", end_z),
                       at(SEGY_TR_GROUP_X, scalco, 1, "gx (byte 81)", end_x),
                       three ? at(SEGY_TR_GROUP_Y, scalco, 1, "gy (byte 85)", end_y) : 0.0};
    shots.add(field(th, SEGY_TR_FIELD_RECORD), src, rec, where + " (fldr, byte 9)");
    int const s = shots.current();
    if (static_cast<int>(first_trace.size()) == s) first_trace.push_back(i);
    shot_of_trace[static_cast<std::size_t>(i)] = s;
  }
  shots.finish(r, name);
  if (!values) return r;
  r.data.assign(
      static_cast<std::size_t>(r.shots) * static_cast<std::size_t>(r.nt) * static_cast<std::size_t>(r.receivers), 0.0f);
  std::vector<unsigned char> raw;
  std::vector<double> v;
  for (int i = 0; i < o.layout.traces; ++i) {
    int const s = shot_of_trace[static_cast<std::size_t>(i)];
    int const k = i - first_trace[static_cast<std::size_t>(s)];
    trace_values(o, i, raw, v, name);
    for (int t = 0; t < r.nt; ++t) {
      // A sample float32 cannot hold (NaN, inf, an IBM float beyond 3.4e38) stops the read, as
      // the HDF5 reader's check does, before any run writes a file.
      float const x = static_cast<float>(v[static_cast<std::size_t>(t)]);
      KSWEEP_REQUIRE(std::isfinite(x), name << ": trace " << i + 1 << " (shot " << s << ", receiver " << k
                                            << ") holds a sample that is not a finite float32 ("
                                            << v[static_cast<std::size_t>(t)] << ") at time sample " << t << " ("
                                            << t * r.dt << " s); the data cannot be inverted: remove or repair "
                                            << "that trace");
      r.data[(static_cast<std::size_t>(s) * r.nt + static_cast<std::size_t>(t)) * r.receivers +
             static_cast<std::size_t>(k)] = x;
    }
  }
  return r;
}

}  // namespace ksweep::io
