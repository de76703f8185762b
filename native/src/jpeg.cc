// The fingerprint detector's JPEG decode at a reduced scale, on the system's libjpeg-turbo, in the calling
// thread (one call per image):
//   decodeScaled(bytes, denom, maxScans, into) -> {width, height, channels, imageWidth, imageHeight}, the
//     pixels written to the start of `into` (rows of width * channels bytes), or a string saying why it
//     declined (the caller then decodes with sharp, which gives the same pixels).
// `denom` (2, 4 or 8) is libjpeg's DCT-domain scaling, the shrink-on-load sharp asks libvips for; the
// output is floor(side / denom) on each side, as libvips crops libjpeg's rounded-up scaled size. Declined:
// anything libvips would treat differently or libjpeg only warned about: an ICC profile (sharp converts
// through it), components other than YCbCr or greyscale, precision other than 8 bits, any warning (damaged
// data), more than `maxScans` scans (a progressive file built to be slow), any error.
// Built only where libjpeg's headers and library are found (native/has-jpeg.mjs); without it optmark
// decodes with sharp alone (the same answers, slower).
#include <napi.h>

#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

// After <cstdio>: jpeglib.h uses FILE and size_t without including what declares them.
// clang-format off
#include <jpeglib.h>
// clang-format on

namespace {

struct Errors {
  jpeg_error_mgr pub;
  jmp_buf jump;
  int warnings;
  int maxScans;
  const char* why;  // set before a longjmp that is not libjpeg's own error
};

void OnError(j_common_ptr cinfo) { longjmp(reinterpret_cast<Errors*>(cinfo->err)->jump, 1); }

// Level -1 is a warning (corrupt data, premature end); higher levels are traces.
void OnMessage(j_common_ptr cinfo, int level) {
  if (level < 0) reinterpret_cast<Errors*>(cinfo->err)->warnings++;
}

void OnProgress(j_common_ptr cinfo) {
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  auto* e = reinterpret_cast<Errors*>(cinfo->err);
  if (d->input_scan_number > e->maxScans) {
    e->why = "too many scans";
    longjmp(e->jump, 1);
  }
}

bool HasIccProfile(j_decompress_ptr cinfo) {
  static const char kIcc[] = "ICC_PROFILE";  // with its terminating NUL: 12 bytes
  for (jpeg_saved_marker_ptr m = cinfo->marker_list; m != nullptr; m = m->next) {
    if (m->marker == JPEG_APP0 + 2 && m->data_length >= sizeof(kIcc) && std::memcmp(m->data, kIcc, sizeof(kIcc)) == 0) return true;
  }
  return false;
}

struct Decoded {
  uint8_t* pixels = nullptr;  // the caller's, `capacity` bytes
  size_t capacity = 0;
  int width = 0, height = 0, channels = 0, imageWidth = 0, imageHeight = 0;
};

// Plain C-style: libjpeg leaves by longjmp, so nothing here has a destructor. Returns nullptr on success,
// else why it declined.
const char* Decode(const uint8_t* data, size_t size, int denom, int maxScans, Decoded* out) {
  jpeg_decompress_struct cinfo;
  Errors err;
  jpeg_progress_mgr progress;
  uint8_t* volatile row = nullptr;
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = OnError;
  err.pub.emit_message = OnMessage;
  err.warnings = 0;
  err.maxScans = maxScans;
  err.why = nullptr;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    std::free(row);
    return err.why != nullptr ? err.why : "libjpeg error";
  }
  jpeg_create_decompress(&cinfo);
  progress.progress_monitor = OnProgress;
  cinfo.progress = &progress;
  jpeg_mem_src(&cinfo, const_cast<unsigned char*>(data), static_cast<unsigned long>(size));
  jpeg_save_markers(&cinfo, JPEG_APP0 + 2, 12);
  jpeg_read_header(&cinfo, TRUE);
  const char* why = nullptr;
  if (HasIccProfile(&cinfo)) why = "ICC profile";
  else if (cinfo.data_precision != 8) why = "not 8-bit";
  else if (!(cinfo.jpeg_color_space == JCS_YCbCr && cinfo.num_components == 3) && !(cinfo.jpeg_color_space == JCS_GRAYSCALE && cinfo.num_components == 1))
    why = "not YCbCr or greyscale";
  else if (err.warnings > 0) why = "warning";
  if (why != nullptr) {
    jpeg_destroy_decompress(&cinfo);
    return why;
  }
  cinfo.scale_num = 1;
  cinfo.scale_denom = static_cast<unsigned int>(denom);
  jpeg_start_decompress(&cinfo);
  const int channels = cinfo.output_components;
  const int width = static_cast<int>(cinfo.image_width / static_cast<unsigned>(denom));
  const int height = static_cast<int>(cinfo.image_height / static_cast<unsigned>(denom));
  if (width < 1 || height < 1 || static_cast<JDIMENSION>(width) > cinfo.output_width || static_cast<JDIMENSION>(height) > cinfo.output_height ||
      (channels != 1 && channels != 3)) {
    jpeg_destroy_decompress(&cinfo);
    return "unexpected output size";
  }
  const size_t stride = static_cast<size_t>(width) * channels;
  const size_t full = static_cast<size_t>(cinfo.output_width) * channels;
  if (stride * height > out->capacity) {
    err.why = "output buffer too small";
    longjmp(err.jump, 1);
  }
  if (full != stride) row = static_cast<uint8_t*>(std::malloc(full));
  if (full != stride && row == nullptr) {
    err.why = "out of memory";
    longjmp(err.jump, 1);
  }
  while (cinfo.output_scanline < static_cast<JDIMENSION>(height)) {
    uint8_t* dst = out->pixels + stride * cinfo.output_scanline;
    JSAMPROW target = row != nullptr ? row : dst;
    if (jpeg_read_scanlines(&cinfo, &target, 1) != 1) {
      err.why = "short read";
      longjmp(err.jump, 1);
    }
    if (row != nullptr) std::memcpy(dst, row, stride);
  }
  if (err.warnings > 0) {
    err.why = "warning";
    longjmp(err.jump, 1);
  }
  out->width = width;
  out->height = height;
  out->channels = channels;
  out->imageWidth = static_cast<int>(cinfo.image_width);
  out->imageHeight = static_cast<int>(cinfo.image_height);
  // The rows past the cropped height are not read: abort rather than finish.
  jpeg_destroy_decompress(&cinfo);
  std::free(row);
  return nullptr;
}

Napi::Value DecodeScaled(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto isBytes = [](const Napi::Value& v) { return v.IsTypedArray() && v.As<Napi::TypedArray>().TypedArrayType() == napi_uint8_array; };
  if (info.Length() < 4 || !isBytes(info[0]) || !info[1].IsNumber() || !info[2].IsNumber() || !isBytes(info[3])) {
    Napi::TypeError::New(env, "decodeScaled(bytes: Uint8Array, denom: 2 | 4 | 8, maxScans: number, into: Uint8Array)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  auto bytes = info[0].As<Napi::Uint8Array>();
  const int denom = info[1].As<Napi::Number>().Int32Value();
  const int maxScans = info[2].As<Napi::Number>().Int32Value();
  if (denom != 2 && denom != 4 && denom != 8) {
    Napi::RangeError::New(env, "decodeScaled: denom must be 2, 4 or 8").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  auto into = info[3].As<Napi::Uint8Array>();
  Decoded d;
  d.pixels = into.Data();
  d.capacity = into.ByteLength();
  const char* why = Decode(bytes.Data(), bytes.ByteLength(), denom, maxScans < 1 ? 1 : maxScans, &d);
  if (why != nullptr) return Napi::String::New(env, why);
  Napi::Object o = Napi::Object::New(env);
  o.Set("width", d.width);
  o.Set("height", d.height);
  o.Set("channels", d.channels);
  o.Set("imageWidth", d.imageWidth);
  o.Set("imageHeight", d.imageHeight);
  return o;
}

// The loader asks every addon what it runs on: here the libjpeg API version it was built against.
Napi::Value Simd(const Napi::CallbackInfo& info) { return Napi::String::New(info.Env(), "libjpeg " + std::to_string(JPEG_LIB_VERSION)); }

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("decodeScaled", Napi::Function::New(env, DecodeScaled));
  exports.Set("simd", Napi::Function::New(env, Simd));
  return exports;
}

}  // namespace

NODE_API_MODULE(optmark_jpeg, Init)
