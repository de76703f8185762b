// Byte helpers for the request path, one call per buffer:
//   base64Encode(src, dst) -> characters written: standard base64 with padding, straight into dst, so a
//     response body never exists as a V8 string (an AVX2 kernel, Mula & Lemire 2018, when the CPU has it).
//   release(view) -> bytes handed back: madvise(MADV_DONTNEED) on the whole pages inside a byte range,
//     so an idle server's resident memory returns to its idle level after a burst. Used only on arena
//     ranges nobody holds; they read as zeros afterwards. Linux only; elsewhere it releases nothing.
//   indexOf(haystack, needle, from) -> the first index >= from where needle occurs, or -1: the multipart
//     delimiter search over a whole upload (AVX2: candidates where the needle's first and last bytes both
//     match, 32 positions per step, then a memcmp; Mula's "SIMD-friendly substring search"). Without
//     AVX2, memchr for the first byte and memcmp for the rest.
//   trim() -> whether memory went back: glibc's malloc_trim, which returns the free memory every thread's
//     malloc arena keeps after a burst (worker threads each get one). Elsewhere a no-op.
#include <napi.h>

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define OPTMARK_X86 1
#endif

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace {

const char kAlphabet[65] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

struct PairTable {
  uint16_t pair[4096];  // two output characters for each 12-bit value
  PairTable() {
    for (int i = 0; i < 4096; i++) {
      pair[i] = static_cast<uint16_t>(static_cast<uint8_t>(kAlphabet[i >> 6]) | (static_cast<uint16_t>(static_cast<uint8_t>(kAlphabet[i & 63])) << 8));
    }
  }
};
const PairTable kPairs;

size_t EncodeScalar(const uint8_t* src, size_t n, uint8_t* dst) {
  uint8_t* out = dst;
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    const uint32_t v = (static_cast<uint32_t>(src[i]) << 16) | (static_cast<uint32_t>(src[i + 1]) << 8) | src[i + 2];
    const uint16_t a = kPairs.pair[v >> 12];
    const uint16_t b = kPairs.pair[v & 4095];
    std::memcpy(out, &a, 2);
    std::memcpy(out + 2, &b, 2);
    out += 4;
  }
  const size_t rest = n - i;
  if (rest > 0) {
    const uint32_t v = (static_cast<uint32_t>(src[i]) << 16) | (rest == 2 ? static_cast<uint32_t>(src[i + 1]) << 8 : 0);
    out[0] = kAlphabet[v >> 18];
    out[1] = kAlphabet[(v >> 12) & 63];
    out[2] = rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out[3] = '=';
    out += 4;
  }
  return static_cast<size_t>(out - dst);
}

#if OPTMARK_X86
// 24 input bytes -> 32 characters per step. Each step loads 32 bytes starting 4 before its input (the
// first step from a padded copy), so the lane shuffle finds every 3-byte group inside its own lane.
__attribute__((target("avx2"))) size_t EncodeAvx2(const uint8_t* src, size_t n, uint8_t* dst) {
  const __m256i shuffle = _mm256_set_epi8(10, 11, 9, 10, 7, 8, 6, 7, 4, 5, 3, 4, 1, 2, 0, 1, 14, 15, 13, 14, 11, 12, 10, 11, 8, 9, 7, 8, 5, 6, 4, 5);
  const __m256i lut =
      _mm256_setr_epi8(65, 71, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -19, -16, 0, 0, 65, 71, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -19, -16, 0, 0);
  uint8_t* out = dst;
  size_t i = 0;
  while (i + 28 <= n) {
    __m256i in;
    if (i >= 4) {
      in = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i - 4));
    } else {
      uint8_t first[32] = {0};
      std::memcpy(first + 4, src + i, 28);
      in = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(first));
    }
    in = _mm256_shuffle_epi8(in, shuffle);
    const __m256i hi = _mm256_mulhi_epu16(_mm256_and_si256(in, _mm256_set1_epi32(0x0fc0fc00)), _mm256_set1_epi32(0x04000040));
    const __m256i lo = _mm256_mullo_epi16(_mm256_and_si256(in, _mm256_set1_epi32(0x003f03f0)), _mm256_set1_epi32(0x01000010));
    const __m256i idx = _mm256_or_si256(hi, lo);  // one 6-bit value per byte
    __m256i sel = _mm256_subs_epu8(idx, _mm256_set1_epi8(51));
    sel = _mm256_sub_epi8(sel, _mm256_cmpgt_epi8(idx, _mm256_set1_epi8(25)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_add_epi8(idx, _mm256_shuffle_epi8(lut, sel)));
    out += 32;
    i += 24;
  }
  return static_cast<size_t>(out - dst) + EncodeScalar(src + i, n - i, out);
}

const bool kHasAvx2 = __builtin_cpu_supports("avx2");
#endif

size_t FindScalar(const uint8_t* h, size_t n, const uint8_t* k, size_t m) {
  // Portable: first byte by memchr, then the rest by memcmp.
  if (m > n) return SIZE_MAX;
  const uint8_t* p = h;
  const uint8_t* end = h + (n - m) + 1;
  while (p < end) {
    p = static_cast<const uint8_t*>(std::memchr(p, k[0], static_cast<size_t>(end - p)));
    if (p == nullptr) return SIZE_MAX;
    if (std::memcmp(p + 1, k + 1, m - 1) == 0) return static_cast<size_t>(p - h);
    p++;
  }
  return SIZE_MAX;
}

#if OPTMARK_X86
// Needles of 2 bytes or more. Position i is a candidate when h[i] == k[0] and h[i + m - 1] == k[m - 1];
// in image data that is one position in 65,536, so the loop runs at memory speed.
__attribute__((target("avx2"))) size_t FindAvx2(const uint8_t* h, size_t n, const uint8_t* k, size_t m) {
  if (m > n) return SIZE_MAX;
  const __m256i first = _mm256_set1_epi8(static_cast<char>(k[0]));
  const __m256i last = _mm256_set1_epi8(static_cast<char>(k[m - 1]));
  const size_t positions = n - m + 1;  // candidate start positions
  size_t i = 0;
  for (; i + 32 <= positions; i += 32) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i + m - 1));
    uint32_t mask = static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_and_si256(_mm256_cmpeq_epi8(a, first), _mm256_cmpeq_epi8(b, last))));
    while (mask != 0) {
      const size_t at = i + static_cast<size_t>(__builtin_ctz(mask));
      if (std::memcmp(h + at + 1, k + 1, m - 2) == 0) return at;
      mask &= mask - 1;
    }
  }
  const size_t rest = FindScalar(h + i, n - i, k, m);
  return rest == SIZE_MAX ? SIZE_MAX : i + rest;
}
#endif

size_t Find(const uint8_t* h, size_t n, const uint8_t* k, size_t m) {
  if (m == 0) return 0;
#if OPTMARK_X86
  if (kHasAvx2 && m >= 2) return FindAvx2(h, n, k, m);
#endif
  return FindScalar(h, n, k, m);
}

bool Bytes(Napi::Env env, Napi::Value v, uint8_t*& data, size_t& length) {
  napi_typedarray_type type;
  void* raw = nullptr;
  napi_value buffer;
  size_t offset = 0;
  if (!v.IsTypedArray() || napi_get_typedarray_info(env, v, &type, &length, &raw, &buffer, &offset) != napi_ok || type != napi_uint8_array) {
    Napi::TypeError::New(env, "expected a Uint8Array").ThrowAsJavaScriptException();
    return false;
  }
  data = static_cast<uint8_t*>(raw);
  return true;
}

Napi::Value Base64Encode(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  uint8_t* src = nullptr;
  uint8_t* dst = nullptr;
  size_t n = 0;
  size_t room = 0;
  if (info.Length() < 2 || !Bytes(env, info[0], src, n) || !Bytes(env, info[1], dst, room)) return env.Undefined();
  if ((n + 2) / 3 * 4 > room) {
    Napi::RangeError::New(env, "base64Encode: destination too small").ThrowAsJavaScriptException();
    return env.Undefined();
  }
#if OPTMARK_X86
  const size_t written = kHasAvx2 ? EncodeAvx2(src, n, dst) : EncodeScalar(src, n, dst);
#else
  const size_t written = EncodeScalar(src, n, dst);
#endif
  return Napi::Number::New(env, static_cast<double>(written));
}

Napi::Value Release(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  uint8_t* data = nullptr;
  size_t length = 0;
  if (info.Length() < 1 || !Bytes(env, info[0], data, length)) return env.Undefined();
#if defined(__linux__)
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t start = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (start + page - 1) & ~(page - 1);
  const uintptr_t last = (start + length) & ~(page - 1);
  if (last > first && madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) == 0) {
    return Napi::Number::New(env, static_cast<double>(last - first));
  }
#endif
  return Napi::Number::New(env, 0);
}

Napi::Value IndexOf(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  uint8_t* h = nullptr;
  uint8_t* k = nullptr;
  size_t n = 0;
  size_t m = 0;
  if (info.Length() < 3 || !Bytes(env, info[0], h, n) || !Bytes(env, info[1], k, m)) return env.Undefined();
  if (!info[2].IsNumber()) {
    Napi::TypeError::New(env, "indexOf: from must be a number").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const double from = info[2].As<Napi::Number>().DoubleValue();
  if (!(from >= 0) || from > static_cast<double>(n)) return Napi::Number::New(env, -1);
  const size_t start = static_cast<size_t>(from);
  const size_t at = Find(h + start, n - start, k, m);
  return Napi::Number::New(env, at == SIZE_MAX ? -1.0 : static_cast<double>(start + at));
}

Napi::Value Trim(const Napi::CallbackInfo& info) {
#if defined(__GLIBC__)
  return Napi::Boolean::New(info.Env(), malloc_trim(0) != 0);
#else
  return Napi::Boolean::New(info.Env(), false);
#endif
}

Napi::Value Simd(const Napi::CallbackInfo& info) {
#if OPTMARK_X86
  return Napi::String::New(info.Env(), kHasAvx2 ? "avx2" : "scalar");
#else
  return Napi::String::New(info.Env(), "scalar");
#endif
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("base64Encode", Napi::Function::New(env, Base64Encode, "base64Encode"));
  exports.Set("release", Napi::Function::New(env, Release, "release"));
  exports.Set("indexOf", Napi::Function::New(env, IndexOf, "indexOf"));
  exports.Set("trim", Napi::Function::New(env, Trim, "trim"));
  exports.Set("simd", Napi::Function::New(env, Simd, "simd"));
  return exports;
}

}  // namespace

NODE_API_MODULE(optmark_bytes, Init)
