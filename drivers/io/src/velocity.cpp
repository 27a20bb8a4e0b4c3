#include <ksweep/io/velocity.hpp>

#include <ksweep/io/segy.hpp>

#include <ksweep/base/config.hpp>
#include <ksweep/base/error.hpp>
#include <ksweep/io/hdf5_io.hpp>

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

namespace ksweep::io {
namespace {

std::string const fetch_script = "share/marmousi/fetch_marmousi.py";

bool host_is_little_endian() {
  std::uint32_t const one = 1;
  unsigned char first = 0;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

/// The name of what a model file holds ("velocity", "density"), its key and its unit, by the
/// dataset asked for ("rho": a density).
struct Kind {
  char const* what;
  char const* key;
  char const* unit;
};
Kind kind_of(std::string const& dataset) {
  return dataset == "rho" ? Kind{"density", "model.density", "kg/m^3"} : Kind{"velocity", "model.source", "m/s"};
}

std::vector<float> read_raw_f32(std::filesystem::path const& path, std::size_t count, Kind const& kind) {
  std::error_code ec;
  auto const bytes = std::filesystem::file_size(path, ec);
  KSWEEP_REQUIRE(!ec, "cannot stat " << kind.what << " file " << shown_path(path) << ": " << ec.message());
  std::uintmax_t const expected = static_cast<std::uintmax_t>(count) * sizeof(float);
  KSWEEP_REQUIRE(bytes == expected, kind.what << " file " << shown_path(path) << " has " << bytes << " bytes, expected "
                                              << expected << " (nz*nx*4 for float32)");
  std::vector<float> v(count);
  std::ifstream in(path, std::ios::binary);
  KSWEEP_REQUIRE(in.good(), "cannot open " << kind.what << " file " << shown_path(path));
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(expected));
  KSWEEP_REQUIRE(in.gcount() == static_cast<std::streamsize>(expected),
                 "short read from " << shown_path(path) << ": got " << in.gcount() << " of " << expected << " bytes");
  if (!host_is_little_endian()) {
    for (auto& x : v) {
      std::uint32_t u = 0;
      std::memcpy(&u, &x, 4);
      u = (u >> 24) | ((u >> 8) & 0xff00u) | ((u << 8) & 0xff0000u) | (u << 24);
      std::memcpy(&x, &u, 4);
    }
  }
  return v;
}

void check_values(VelocityModel const& m, std::string const& what, Kind const& kind) {
  std::size_t const ny = m.ny > 0 ? static_cast<std::size_t>(m.ny) : 1, nx = static_cast<std::size_t>(m.nx);
  for (std::size_t i = 0; i < m.vp.size(); ++i) {
    float const v = m.vp[i];
    if (std::isfinite(v) && v > 0) continue;
    std::ostringstream at;
    if (m.ny > 0) at << "(iz = " << i / nx / ny << ", iy = " << i / nx % ny << ", ix = " << i % nx << ")";
    else at << "(iz = " << i / nx << ", ix = " << i % nx << ")";
    KSWEEP_REQUIRE(false, kind.what << " model " << shown(what) << " has a bad value at " << at.str() << ": " << v
                                    << " (every value must be finite and > 0 " << kind.unit << ")");
  }
}

void check_declared_size(ModelSection const& s, VelocityModel const& m) {
  KSWEEP_REQUIRE(s.nz == 0 || s.nz == m.nz, "model.nz = " << s.nz << " does not match " << s.source << " (nz = " << m.nz
                                                          << "); leave it out or set it to " << m.nz);
  KSWEEP_REQUIRE(s.nx == 0 || s.nx == m.nx, "model.nx = " << s.nx << " does not match " << s.source << " (nx = " << m.nx
                                                          << "); leave it out or set it to " << m.nx);
  KSWEEP_REQUIRE(s.ny == 0 || s.ny == m.ny, "model.ny = " << s.ny << " does not match " << s.source << " (ny = " << m.ny
                                                          << (m.ny == 0 ? ", a 2D model" : "")
                                                          << "); leave it out or set it to " << m.ny);
  KSWEEP_REQUIRE(s.dh == 0 || std::abs(s.dh - m.dh) <= 1e-9 * m.dh,
                 "model.dh = " << s.dh << " does not match " << s.source << " (dh = " << m.dh
                               << "); leave it out or set it to " << m.dh);
}

VelocityModel load_named(NamedModel const& n) {
  auto const path = find_marmousi_file(n.file_name);
  std::error_code ec;
  auto const bytes = std::filesystem::file_size(path, ec);
  KSWEEP_REQUIRE(!ec && bytes == n.bytes, "Marmousi file " << path << " has " << (ec ? 0 : bytes) << " bytes, expected "
                                                           << n.bytes << "; re-run " << fetch_script);
  auto const hash = sha256_file(path);
  KSWEEP_REQUIRE(hash == n.sha256, "Marmousi file " << path << " has SHA-256 " << hash << ", expected " << n.sha256
                                                    << "; the file is corrupt or not the "
                                                       "expected model, re-run "
                                                    << fetch_script);
  VelocityModel m;
  m.nz = n.nz;
  m.nx = n.nx;
  m.dh = n.dh;
  m.vp = read_raw_f32(path, static_cast<std::size_t>(n.nz) * static_cast<std::size_t>(n.nx), kind_of("vp"));
  m.description = n.name + " (" + path.string() + ")";
  return m;
}

void decimate(VelocityModel& m, int d) {
  if (d == 1) return;
  int const nz = (m.nz - 1) / d + 1, nx = (m.nx - 1) / d + 1;
  int const ny0 = m.ny > 0 ? m.ny : 1, ny = m.ny > 0 ? (m.ny - 1) / d + 1 : 1, dy = m.ny > 0 ? d : 0;
  std::vector<float> out(static_cast<std::size_t>(nz) * ny * nx);
  for (int iz = 0; iz < nz; ++iz)
    for (int iy = 0; iy < ny; ++iy)
      for (int ix = 0; ix < nx; ++ix)
        out[(static_cast<std::size_t>(iz) * ny + iy) * nx + ix] =
            m.vp[(static_cast<std::size_t>(iz) * d * ny0 + static_cast<std::size_t>(iy) * dy) * m.nx +
                 static_cast<std::size_t>(ix) * d];
  m.nz = nz;
  m.nx = nx;
  if (m.ny > 0) m.ny = ny;
  m.dh *= d;
  m.vp = std::move(out);
}

void crop(VelocityModel& m, std::array<int, 2> z, std::array<int, 2> y, std::array<int, 2> x) {
  KSWEEP_REQUIRE(z[0] >= 0 && z[0] < z[1] && z[1] <= m.nz,
                 "model.crop_z = [" << z[0] << ", " << z[1] << "] must satisfy 0 <= z0 < z1 <= nz = " << m.nz
                                    << " (cells after decimation)");
  KSWEEP_REQUIRE(x[0] >= 0 && x[0] < x[1] && x[1] <= m.nx,
                 "model.crop_x = [" << x[0] << ", " << x[1] << "] must satisfy 0 <= x0 < x1 <= nx = " << m.nx
                                    << " (cells after decimation)");
  int const ny0 = m.ny > 0 ? m.ny : 1;
  KSWEEP_REQUIRE(y[0] >= 0 && y[0] < y[1] && y[1] <= ny0,
                 "model.crop_y = [" << y[0] << ", " << y[1] << "] must satisfy 0 <= y0 < y1 <= ny = " << m.ny
                                    << (m.ny > 0 ? " (cells after decimation)" : " (the model is 2D)"));
  int const nz = z[1] - z[0], ny = y[1] - y[0], nx = x[1] - x[0];
  std::vector<float> out(static_cast<std::size_t>(nz) * ny * nx);
  for (int iz = 0; iz < nz; ++iz)
    for (int iy = 0; iy < ny; ++iy)
      for (int ix = 0; ix < nx; ++ix)
        out[(static_cast<std::size_t>(iz) * ny + iy) * nx + ix] =
            m.vp[(static_cast<std::size_t>(iz + z[0]) * ny0 + (iy + y[0])) * m.nx +
                 static_cast<std::size_t>(ix + x[0])];
  m.nz = nz;
  m.nx = nx;
  if (m.ny > 0) m.ny = ny;
  m.vp = std::move(out);
}

/// "layered3d": dipping layers under three rows of water, with a slow sphere.
VelocityModel layered3d(ModelSection const& s) {
  VelocityModel m;
  m.nz = s.nz > 0 ? s.nz : 48;
  m.ny = s.ny > 0 ? s.ny : 40;
  m.nx = s.nx > 0 ? s.nx : 64;
  m.dh = s.dh > 0 ? s.dh : 20.0;
  KSWEEP_REQUIRE(static_cast<long long>(m.nz) * m.ny * m.nx < (1LL << 31),
                 "model.source = \"layered3d\": " << m.nz << " x " << m.ny << " x " << m.nx
                                                  << " cells exceeds the limit of 2^31 - 1 cells");
  m.vp.resize(static_cast<std::size_t>(m.nz) * m.ny * m.nx);
  double const cz = 0.55 * m.nz, cy = 0.5 * (m.ny - 1), cx = 0.5 * (m.nx - 1), r = 0.12 * std::min({m.nz, m.ny, m.nx});
  for (int iz = 0; iz < m.nz; ++iz)
    for (int iy = 0; iy < m.ny; ++iy)
      for (int ix = 0; ix < m.nx; ++ix) {
        double v = 1500.0;
        if (iz >= 3) {
          // Interfaces dipping along x and y, layers of 1/5 of the depth.
          double const depth = (iz - 3.0) + 0.12 * (ix - cx) + 0.08 * (iy - cy);
          double const layer = std::clamp(std::floor(5.0 * depth / m.nz), 0.0, 5.0);
          v = 1800.0 + 350.0 * layer + 0.3 * (iz - 3.0) * m.dh;
          double const dz = iz - cz, dy = iy - cy, dx = ix - cx;
          if (dz * dz + dy * dy + dx * dx <= r * r) v -= 400.0;  // the inclusion
        }
        m.vp[(static_cast<std::size_t>(iz) * m.ny + iy) * m.nx + ix] = static_cast<float>(v);
      }
  std::ostringstream d;
  d << "layered3d (generated: dipping layers, a slow sphere of radius " << r << " cells)";
  m.description = d.str();
  return m;
}

/// "marmousi2_3d": a 2D model extruded along y over ny cells; slice iy is the 2D model shifted
/// along x by round(nx / 10 sin(pi iy / (ny - 1))) cells (edges repeated), so that structures
/// curve across the lines.
VelocityModel extrude(VelocityModel const& m2, int ny) {
  VelocityModel m = m2;
  m.ny = ny;
  m.vp.resize(static_cast<std::size_t>(m.nz) * ny * m.nx);
  double const pi = 3.14159265358979323846;
  for (int iy = 0; iy < ny; ++iy) {
    int const shift = ny > 1 ? static_cast<int>(std::lround(0.1 * m.nx * std::sin(pi * iy / (ny - 1)))) : 0;
    for (int iz = 0; iz < m.nz; ++iz)
      for (int ix = 0; ix < m.nx; ++ix)
        m.vp[(static_cast<std::size_t>(iz) * ny + iy) * m.nx + ix] =
            m2.vp[static_cast<std::size_t>(iz) * m.nx + std::clamp(ix + shift, 0, m.nx - 1)];
  }
  return m;
}

/// The factor from model.units to m/s.
double units_scale(ModelSection const& s) { return s.units == "km/s" ? 1000.0 : 1.0; }

}  // namespace

std::vector<NamedModel> const& named_models() {
  static std::vector<NamedModel> const models{
      {"marmousi2", "marmousi2_vp_nz281_nx1361_dx12.5.f32", 281, 1361, 12.5,
       "1c9297cc881d1103ffb52abf452b25bf2b878e6d519edf963a20eca9e9077bee", 1529764},
      {"marmousi2_fine", "marmousi2_vp_nz561_nx2721_dx6.25.f32", 561, 2721, 6.25,
       "f1cf50d53005c6ed04c794d16c8c29401031653b5727b63694f144d863afb44a", 6105924},
      {"marmousi", "marmousi_vp_nz122_nx384_dx24.f32", 122, 384, 24.0,
       "5b0db7c3b494a647c5eac581a9e067de58ed0560709b2bcb3b552005cb6d26dd", 187392},
  };
  return models;
}

std::filesystem::path find_marmousi_file(std::string const& file_name) {
  namespace fs = std::filesystem;
  std::vector<fs::path> dirs;
  if (char const* env = std::getenv("KSWEEP_MARMOUSI_DIR"); env != nullptr && *env != '\0') {
    dirs.emplace_back(env);
  }
  std::error_code ec;
  fs::path const cwd = fs::current_path(ec);
  if (!ec) dirs.push_back(cwd / ".." / "shared" / "marmousi");
  dirs.push_back(fs::path(KSWEEP_SOURCE_DIR) / ".." / "shared" / "marmousi");
  if (char const* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    dirs.push_back(fs::path(xdg) / "ksweep" / "marmousi");
  } else if (char const* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    dirs.push_back(fs::path(home) / ".cache" / "ksweep" / "marmousi");
  }

  std::ostringstream looked;
  for (auto const& dir : dirs) {
    fs::path const candidate = (dir / file_name).lexically_normal();
    if (fs::is_regular_file(candidate, ec)) return candidate;
    looked << "\n  " << candidate.string();
  }
  KSWEEP_REQUIRE(false, "velocity file '" << file_name << "' not found; looked in:" << looked.str()
                                          << "\nSet KSWEEP_MARMOUSI_DIR to the directory that "
                                             "holds it, or run /usr/bin/python3 "
                                          << fetch_script << " to download it into the per-user cache");
  return {};
}

std::string sha256_file(std::filesystem::path const& path) {
  std::ifstream in(path, std::ios::binary);
  KSWEEP_REQUIRE(in.good(), "cannot open " << path << " to compute its SHA-256");
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  KSWEEP_REQUIRE(ctx != nullptr, "OpenSSL EVP_MD_CTX_new failed while hashing " << path);
  KSWEEP_REQUIRE(EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1,
                 "OpenSSL EVP_DigestInit_ex(SHA-256) failed while hashing " << path);
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    auto const got = in.gcount();
    if (got > 0) {
      KSWEEP_REQUIRE(EVP_DigestUpdate(ctx.get(), buffer.data(), static_cast<std::size_t>(got)) == 1,
                     "OpenSSL EVP_DigestUpdate failed while hashing " << path);
    }
  }
  KSWEEP_REQUIRE(in.eof() && !in.bad(), "read error while hashing " << path);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  KSWEEP_REQUIRE(EVP_DigestFinal_ex(ctx.get(), digest, &length) == 1,
                 "OpenSSL EVP_DigestFinal_ex failed while hashing " << path);
  static char const hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * length);
  for (unsigned int i = 0; i < length; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 0xf];
  }
  return out;
}

std::string VelocityModel::shape() const {
  return std::to_string(nz) + " x " + (ny > 0 ? std::to_string(ny) + " x " : std::string()) + std::to_string(nx);
}

namespace {

/// Every model.source the loader knows by name.
std::string known_names() {
  std::string names;
  for (auto const& n : named_models()) names += (names.empty() ? "" : ", ") + n.name;
  return names + ", layered3d, marmousi2_3d";
}

}  // namespace

std::string lower_extension(std::filesystem::path const& path) {
  std::string ext = path.extension().string();
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

VelocityModel model_shape(ModelSection const& s, std::string const& dataset) {
  Kind const kind = kind_of(dataset);
  std::string const key = kind.key;
  KSWEEP_REQUIRE(s.decimate >= 1, "model.decimate = " << s.decimate << " must be >= 1");
  bool const extruded = s.source == "marmousi2_3d";
  VelocityModel m;
  bool named = false;
  for (auto const& n : named_models())
    if (n.name == s.source || (extruded && n.name == "marmousi2")) {
      m.nz = n.nz, m.nx = n.nx, m.dh = n.dh, m.description = n.name;
      named = true;
    }
  if (s.source == "layered3d") {
    m.nz = s.nz > 0 ? s.nz : 48, m.ny = s.ny > 0 ? s.ny : 40, m.nx = s.nx > 0 ? s.nx : 64;
    m.dh = s.dh > 0 ? s.dh : 20.0, m.description = "layered3d";
    named = true;
  }
  if (!named) {
    std::string const ext = lower_extension(s.source);
    std::error_code ec;
    bool const h5 = ext == ".h5" || ext == ".hdf5", raw = ext == ".f32" || ext == ".bin",
               segy = ext == ".sgy" || ext == ".segy";
    KSWEEP_REQUIRE(h5 || raw || segy, key << " = \"" << shown(s.source) << "\" is neither a named model ("
                                          << known_names()
                                          << ") nor a path ending in .f32, .bin, .h5, .hdf5, .sgy or .segy");
    KSWEEP_REQUIRE(std::filesystem::exists(s.source, ec), key << " = " << shown_path(s.source) << ": file not found");
    KSWEEP_REQUIRE(std::filesystem::is_regular_file(s.source, ec),
                   key << " = " << shown_path(s.source) << " is not a regular file (a folder, device or pipe)");
    if (h5) {
      m = read_model_shape(s.source, dataset);
    } else if (segy) {
      KSWEEP_REQUIRE(s.dh > 0, key << " = " << shown_path(s.source)
                                   << " is a SEG-Y model, whose headers do not state the grid spacing "
                                      "reliably: set model.dh (metres between traces and between "
                                      "samples)");
      SegyModelShape const l = segy_model_shape(s.source, key);
      m.nz = l.nz, m.ny = l.ny, m.nx = l.nx, m.dh = s.dh;
    } else {
      KSWEEP_REQUIRE(s.nz > 0 && s.nx > 0 && s.dh > 0,
                     key << " = " << shown_path(s.source) << " is a raw float32 file, so model.nz, "
                         << "model.nx and model.dh must all be > 0 (got nz = " << s.nz << ", nx = " << s.nx
                         << ", dh = " << s.dh << "; model.ny > 0 as well for a 3D file)");
      m.nz = s.nz, m.nx = s.nx, m.ny = s.ny, m.dh = s.dh;
    }
    m.description = s.source;
  }
  if (!extruded && s.source != "layered3d") check_declared_size(s, m);
  KSWEEP_REQUIRE(m.dh > 0 && std::isfinite(m.dh), kind.what << " model " << shown(m.description)
                                                            << " has grid spacing dh = " << m.dh
                                                            << ", must be finite and > 0");
  KSWEEP_REQUIRE(m.nz >= 1 && m.nx >= 1 && m.ny >= 0,
                 kind.what << " model " << shown(m.description) << " is empty (" << m.shape() << " cells)");
  auto const after = [d = s.decimate](int n) { return (n - 1) / d + 1; };
  m.nz = after(m.nz), m.nx = after(m.nx), m.dh *= s.decimate;
  if (m.ny > 0) m.ny = after(m.ny);
  KSWEEP_REQUIRE(!s.crop_y || m.ny > 0 || extruded,
                 "model.crop_y is set but " << key << " = \"" << shown(s.source) << "\" is a 2D model");
  KSWEEP_REQUIRE(!(extruded && s.crop_y),
                 "model.crop_y: \"marmousi2_3d\" is extruded to model.ny cells; set model.ny instead");
  auto check_crop = [](char const* crop_key, std::optional<std::array<int, 2>> const& c, int n, bool three) {
    if (!c) return n;
    KSWEEP_REQUIRE((*c)[0] >= 0 && (*c)[0] < (*c)[1] && (*c)[1] <= n,
                   crop_key << " = [" << (*c)[0] << ", " << (*c)[1] << "] must satisfy 0 <= lo < hi <= " << n
                            << (three ? " (cells after decimation)" : " (the model is 2D)"));
    return (*c)[1] - (*c)[0];
  };
  m.nz = check_crop("model.crop_z", s.crop_z, m.nz, true);
  m.nx = check_crop("model.crop_x", s.crop_x, m.nx, true);
  if (m.ny > 0) m.ny = check_crop("model.crop_y", s.crop_y, m.ny, true);
  if (extruded) m.ny = s.ny > 0 ? s.ny : 32;
  long long const cells = static_cast<long long>(m.nz) * (m.ny > 0 ? m.ny : 1) * m.nx;
  KSWEEP_REQUIRE(cells < (1LL << 31), key << " = \"" << shown(s.source) << "\": " << m.shape()
                                          << " cells exceeds the limit of 2^31 - 1 cells");
  return m;
}

VelocityModel load_velocity(ModelSection const& s, std::string const& dataset) {
  Kind const kind = kind_of(dataset);
  std::string const key = kind.key;
  // Every check that needs no values (source, sizes, decimation, crops, limits), before any
  // model-sized work; what follows reads and transforms the values only.
  VelocityModel const expected = model_shape(s, dataset);
  bool const extruded = s.source == "marmousi2_3d";
  VelocityModel m;
  auto const& named = named_models();
  auto const it = std::find_if(named.begin(), named.end(), [&](auto const& n) {
    return n.name == s.source || (extruded && n.name == "marmousi2");
  });
  if (it != named.end()) {
    m = load_named(*it);
  } else if (s.source == "layered3d") {
    m = layered3d(s);
  } else if (std::string const ext = lower_extension(s.source); ext == ".h5" || ext == ".hdf5") {
    m = read_model(s.source, dataset);
  } else if (ext == ".sgy" || ext == ".segy") {
    m = read_segy_model(s.source, s.dh, units_scale(s), kind.key);
  } else {  // a raw float32 file, its sizes given (checked by model_shape)
    m.nz = s.nz, m.nx = s.nx, m.ny = s.ny, m.dh = s.dh;
    m.vp = read_raw_f32(
        s.source,
        static_cast<std::size_t>(s.nz) * static_cast<std::size_t>(s.ny > 0 ? s.ny : 1) * static_cast<std::size_t>(s.nx),
        kind);
    m.description = s.source;
  }
  bool const from_file = it == named.end() && s.source != "layered3d";
  if (from_file && !is_segy_path(s.source) && units_scale(s) != 1.0)
    for (auto& v : m.vp) v = static_cast<float>(static_cast<double>(v) * units_scale(s));
  check_values(m, m.description, kind);
  if (from_file && dataset != "rho") {  // a density's plausibility is load_density's
    float const vmax = *std::max_element(m.vp.begin(), m.vp.end());
    KSWEEP_REQUIRE(vmax >= 100.0f, key << " = " << shown_path(s.source) << ": its largest velocity is " << vmax
                                       << " m/s, below any rock's (100 m/s): are its values in km/s? "
                                          "Set model.units = \"km/s\"");
  }

  std::ostringstream desc;
  desc << m.description << ", " << m.shape() << " at " << m.dh << " m";
  decimate(m, s.decimate);
  if (s.decimate > 1) desc << ", decimated by " << s.decimate << " to " << m.shape() << " at " << m.dh << " m";
  if (s.crop_z || s.crop_x || (s.crop_y && !extruded)) {
    auto const z = s.crop_z.value_or(std::array<int, 2>{0, m.nz});
    auto const y = s.crop_y && !extruded ? *s.crop_y : std::array<int, 2>{0, m.ny > 0 ? m.ny : 1};
    auto const x = s.crop_x.value_or(std::array<int, 2>{0, m.nx});
    crop(m, z, y, x);
    desc << ", cropped to z [" << z[0] << ", " << z[1] << ")";
    if (m.ny > 0) desc << " x y [" << y[0] << ", " << y[1] << ")";
    desc << " x [" << x[0] << ", " << x[1] << ") = " << m.shape();
  }
  if (extruded) {
    int const ny = s.ny > 0 ? s.ny : 32;
    m = extrude(m, ny);
    desc << ", extruded along y over " << ny << " cells with a lateral shift of up to " << std::lround(0.1 * m.nx)
         << " cells = " << m.shape();
  }
  m.description = desc.str();
  KSWEEP_REQUIRE(m.nz == expected.nz && m.ny == expected.ny && m.nx == expected.nx,
                 key << " = \"" << shown(s.source) << "\": the model read is " << m.shape() << ", its header said "
                     << expected.shape() << " (the file changed while it was read?)");
  return m;
}

std::vector<float> load_density(ModelSection const& model, VelocityModel const& vm) {
  auto const& d = model.density;
  std::vector<float> rho(vm.vp.size());
  if (d.empty() || d == "gardner") {
    for (std::size_t i = 0; i < rho.size(); ++i)
      rho[i] = static_cast<float>(310.0 * std::pow(static_cast<double>(vm.vp[i]), 0.25));
    return rho;
  }
  auto const ext = std::filesystem::path(d).extension().string();
  if (ext != ".f32" && ext != ".bin" && ext != ".h5" && !is_segy_path(d)) {
    float const value = static_cast<float>(std::stod(d));  // validated by the configuration
    std::fill(rho.begin(), rho.end(), value);
    return rho;
  }
  ModelSection m = model;
  m.source = d;
  m.units = "m/s";  // model.units is the velocity's: a density file holds kg/m^3
  if (m.nz == 0) {  // a named model's raw sizes (a raw density file of its shape)
    for (auto const& nm : named_models())
      if (nm.name == model.source) m.nz = nm.nz, m.nx = nm.nx, m.dh = nm.dh;
  }
  VelocityModel f;
  try {
    f = load_velocity(m, "rho");
  } catch (Error const& e) {
    std::string const what = e.what();
    if (what.rfind("model.density", 0) == 0) throw;  // it names the key already
    throw Error("model.density = " + shown_path(d) + ": " + what);
  }
  KSWEEP_REQUIRE(f.nz == vm.nz && f.nx == vm.nx && f.ny == vm.ny,
                 "model.density = " << shown_path(d) << " is " << f.shape()
                                    << " cells after decimation and cropping, the model (model.source) is "
                                    << vm.shape() << ": the density needs the model's shape");
  for (std::size_t i = 0; i < f.vp.size(); ++i)
    KSWEEP_REQUIRE(std::isfinite(f.vp[i]) && f.vp[i] > 0,
                   "model.density = " << shown_path(d) << ": the density at cell " << i << " is " << f.vp[i]
                                      << " kg/m^3: densities must be finite and > 0");
  float const top = *std::max_element(f.vp.begin(), f.vp.end());
  KSWEEP_REQUIRE(top >= 100.0f, "model.density = " << shown_path(d) << ": its largest density is " << top
                                                   << " kg/m^3, below any rock's or water's (1000): is the file in "
                                                      "g/cm^3? ksweep reads densities in kg/m^3 (g/cm^3 x 1000)");
  return std::move(f.vp);
}

}  // namespace ksweep::io
