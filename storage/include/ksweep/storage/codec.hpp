#pragma once
/// \file codec.hpp
/// Lossy encodings of the saved boundary ring, on integer bit patterns so that they run on
/// every backend and every Kokkos version.
///
/// Values are coded in blocks of 256 consecutive cells:
///  - fp32: the compute precision, unchanged (no scale);
///  - fp16: IEEE binary16 of v / s with one fp32 scale s = max |v| per block, so small values
///          are not flushed to zero;
///  - bf16: bfloat16 of v (round to nearest even), no scale;
///  - int8: q = rne(127 v / s) in [-127, 127] with one fp32 scale s = max |v| per block.
/// NaN and infinity cannot be encoded: the encoder flags them.

#include <ksweep/core/error.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>
#include <string>

namespace ksweep::storage {

enum class Dtype { fp32, fp16, bf16, int8 };

/// Cells per scale block.
inline constexpr int block_size = 256;

Dtype parse_dtype(std::string const& name);
std::string to_string(Dtype d);

/// Whether a dtype carries one fp32 scale per block.
constexpr bool has_scale(Dtype d) { return d == Dtype::fp16 || d == Dtype::int8; }

/// Bytes of one encoded value (fp32 keeps the compute precision: `real_bytes`).
constexpr std::size_t value_bytes(Dtype d, std::size_t real_bytes) {
  return d == Dtype::fp32 ? real_bytes : (d == Dtype::int8 ? 1 : 2);
}

/// Bytes to encode n values: codes, then (if any) the block scales, 8-byte aligned.
constexpr std::size_t encoded_bytes(Dtype d, std::size_t n, std::size_t real_bytes) {
  std::size_t const codes = (n * value_bytes(d, real_bytes) + 7) / 8 * 8;
  std::size_t const blocks = (n + block_size - 1) / block_size;
  return codes + (has_scale(d) ? (blocks * 4 + 7) / 8 * 8 : 0);
}

namespace impl {

KOKKOS_INLINE_FUNCTION std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
KOKKOS_INLINE_FUNCTION float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// float -> IEEE binary16, round to nearest even, with subnormals; |f| beyond the half range
/// saturates to infinity (never happens for scaled values in [-1, 1]).
KOKKOS_INLINE_FUNCTION std::uint16_t float_to_half(float f) {
  std::uint32_t const x = float_bits(f);
  std::uint32_t const sign = (x >> 16) & 0x8000u;
  std::uint32_t const mag = x & 0x7fffffffu;
  if (mag >= 0x47800000u) {  // >= 65536: overflow (or inf/nan)
    return static_cast<std::uint16_t>(sign | (mag > 0x7f800000u ? 0x7e00u : 0x7c00u));
  }
  if (mag < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    if (mag < 0x33000000u) return static_cast<std::uint16_t>(sign);  // < 2^-25 rounds to 0
    std::uint32_t const e = mag >> 23;
    std::uint32_t const m = (mag & 0x7fffffu) | 0x800000u;
    std::uint32_t const shift = 126u - e;  // 14 - (e - 127) + 13 - 1 ... bits to drop (14..24)
    std::uint32_t const half_m = m >> shift;
    std::uint32_t const rem = m & ((1u << shift) - 1u);
    std::uint32_t const halfway = 1u << (shift - 1u);
    std::uint32_t r = half_m + ((rem > halfway || (rem == halfway && (half_m & 1u))) ? 1u : 0u);
    return static_cast<std::uint16_t>(sign | r);
  }
  // Normal: rebias exponent (127 -> 15) and round the 13 dropped mantissa bits to nearest even.
  std::uint32_t h = ((mag - 0x38000000u) >> 13);
  std::uint32_t const rem = mag & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}

KOKKOS_INLINE_FUNCTION float half_to_float(std::uint16_t h) {
  std::uint32_t const sign = (static_cast<std::uint32_t>(h) & 0x8000u) << 16;
  std::uint32_t const e = (h >> 10) & 0x1fu;
  std::uint32_t m = h & 0x3ffu;
  if (e == 0) {
    if (m == 0) return bits_float(sign);
    // subnormal: m * 2^-24
    float const v = static_cast<float>(m) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (e == 31) return bits_float(sign | 0x7f800000u | (m << 13));
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

/// float -> bfloat16, round to nearest even (NaN stays NaN).
KOKKOS_INLINE_FUNCTION std::uint16_t float_to_bf16(float f) {
  std::uint32_t const x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  std::uint32_t const rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>((x + rounding) >> 16);
}
KOKKOS_INLINE_FUNCTION float bf16_to_float(std::uint16_t b) { return bits_float(static_cast<std::uint32_t>(b) << 16); }

/// Round to nearest, ties to even, for |x| <= 2^22.
KOKKOS_INLINE_FUNCTION float rne(float x) {
  float const r = static_cast<float>(static_cast<long long>(x >= 0 ? x + 0.5f : x - 0.5f));
  // Ties: x + 0.5 landed on an integer r with |r - x| == 0.5; choose the even neighbour.
  float const diff = r - x;
  if (diff == 0.5f || diff == -0.5f) {
    long long const ri = static_cast<long long>(r);
    if (ri % 2 != 0) return x >= 0 ? r - 1.0f : r + 1.0f;
  }
  return r;
}

KOKKOS_INLINE_FUNCTION bool finite(float v) { return (float_bits(v) & 0x7f800000u) != 0x7f800000u; }
KOKKOS_INLINE_FUNCTION bool finite(double v) { return v - v == 0.0; }

}  // namespace impl

/// Encodes n values `in` into `out` (bytes) block by block; sets *bad = 1 on NaN or infinity.
template <class Real, class MemorySpace>
struct EncodeBlocks {
  Kokkos::View<Real const*, MemorySpace> m_in;
  Kokkos::View<std::uint8_t*, MemorySpace> m_out;
  Kokkos::View<int, MemorySpace> m_bad;
  std::size_t m_n;
  Dtype m_dtype;

  KOKKOS_INLINE_FUNCTION void operator()(std::size_t b) const {
    std::size_t const i0 = b * block_size;
    std::size_t const i1 = i0 + block_size < m_n ? i0 + block_size : m_n;
    std::uint8_t* base = m_out.data();
    if (m_dtype == Dtype::fp32) {
      Real* codes = reinterpret_cast<Real*>(base);
      for (std::size_t i = i0; i < i1; ++i) {
        if (!impl::finite(m_in(i))) m_bad() = 1;
        codes[i] = m_in(i);
      }
      return;
    }
    if (m_dtype == Dtype::bf16) {
      std::uint16_t* codes = reinterpret_cast<std::uint16_t*>(base);
      for (std::size_t i = i0; i < i1; ++i) {
        float const v = static_cast<float>(m_in(i));
        if (!impl::finite(v)) m_bad() = 1;
        codes[i] = impl::float_to_bf16(v);
      }
      return;
    }
    float amax = 0.0f;
    for (std::size_t i = i0; i < i1; ++i) {
      float const v = static_cast<float>(m_in(i));
      if (!impl::finite(v)) m_bad() = 1;
      float const a = v < 0 ? -v : v;
      amax = a > amax ? a : amax;
    }
    std::size_t const code_bytes = (m_n * value_bytes(m_dtype, sizeof(Real)) + 7) / 8 * 8;
    reinterpret_cast<float*>(base + code_bytes)[b] = amax;
    // Divide rather than multiply by 1 / amax: for a subnormal amax the reciprocal overflows.
    float const den = amax > 0.0f ? amax : 1.0f;
    if (m_dtype == Dtype::fp16) {
      std::uint16_t* codes = reinterpret_cast<std::uint16_t*>(base);
      for (std::size_t i = i0; i < i1; ++i) codes[i] = impl::float_to_half(static_cast<float>(m_in(i)) / den);
    } else {
      std::int8_t* codes = reinterpret_cast<std::int8_t*>(base);
      for (std::size_t i = i0; i < i1; ++i) {
        float q = impl::rne(static_cast<float>(m_in(i)) / den * 127.0f);
        q = q > 127.0f ? 127.0f : (q < -127.0f ? -127.0f : q);
        codes[i] = static_cast<std::int8_t>(q);
      }
    }
  }
};

/// Decodes n values from `in` (bytes) into `out`.
template <class Real, class MemorySpace>
struct DecodeValues {
  Kokkos::View<std::uint8_t const*, MemorySpace> m_in;
  Kokkos::View<Real*, MemorySpace> m_out;
  std::size_t m_n;
  Dtype m_dtype;

  KOKKOS_INLINE_FUNCTION void operator()(std::size_t i) const {
    std::uint8_t const* base = m_in.data();
    switch (m_dtype) {
      case Dtype::fp32: m_out(i) = reinterpret_cast<Real const*>(base)[i]; return;
      case Dtype::bf16: m_out(i) = static_cast<Real>(impl::bf16_to_float(reinterpret_cast<std::uint16_t const*>(base)[i])); return;
      default: break;
    }
    std::size_t const code_bytes = (m_n * value_bytes(m_dtype, sizeof(Real)) + 7) / 8 * 8;
    float const scale = reinterpret_cast<float const*>(base + code_bytes)[i / block_size];
    if (m_dtype == Dtype::fp16) {
      m_out(i) = static_cast<Real>(impl::half_to_float(reinterpret_cast<std::uint16_t const*>(base)[i]) * scale);
    } else {
      m_out(i) = static_cast<Real>(static_cast<float>(reinterpret_cast<std::int8_t const*>(base)[i]) * (scale / 127.0f));
    }
  }
};

/// Encodes `in` (n values) into `out` (encoded_bytes(dtype, n) bytes) on `space`. NaN or
/// infinity sets `bad()` to 1 (checked by the caller at a convenient synchronisation point).
template <class ExecSpace, class Real, class MemorySpace>
void encode(ExecSpace const& space, Dtype dtype, Kokkos::View<Real const*, MemorySpace> in,
            Kokkos::View<std::uint8_t*, MemorySpace> out, Kokkos::View<int, MemorySpace> bad) {
  std::size_t const n = in.extent(0);
  std::size_t const blocks = (n + block_size - 1) / block_size;
  Kokkos::parallel_for("ksweep::storage::encode", Kokkos::RangePolicy<ExecSpace>(space, 0, blocks),
                       EncodeBlocks<Real, MemorySpace>{in, out, bad, n, dtype});
}

/// Decodes `in` into `out` (n values) on `space`.
template <class ExecSpace, class Real, class MemorySpace>
void decode(ExecSpace const& space, Dtype dtype, Kokkos::View<std::uint8_t const*, MemorySpace> in,
            Kokkos::View<Real*, MemorySpace> out) {
  std::size_t const n = out.extent(0);
  Kokkos::parallel_for("ksweep::storage::decode", Kokkos::RangePolicy<ExecSpace>(space, 0, n),
                       DecodeValues<Real, MemorySpace>{in, out, n, dtype});
}

}  // namespace ksweep::storage
