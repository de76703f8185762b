// File copying for batch marking, one call per file:
//   copyRange(inFd, outFd, inOffset, outOffset, maxLength) -> bytes copied: the input from `inOffset` to
//     its end (at most maxLength bytes) written to the output at `outOffset`, inside the kernel
//     (copy_file_range(2)), so the bytes after a JPEG's metadata never pass through JavaScript memory.
//     Where the kernel cannot (another file system on old kernels, no such call), a pread/pwrite loop.
//   copyRangeAsync(inFd, outFd, inOffset, outOffset, maxLength, callback(err, copied)): the same on
//     libuv's thread pool, so several files are copied at once while the main thread prepares the next.
// Errors are Error objects with `code` (the errno name, as Node's fs gives) and `syscall`.
#include <napi.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#if defined(__linux__)
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>
#endif

#if !defined(_WIN32)
#include <unistd.h>
#endif

namespace {

const char* ErrnoName(int e) {
  switch (e) {
    case ENOSPC:
      return "ENOSPC";
    case EIO:
      return "EIO";
    case EBADF:
      return "EBADF";
    case EDQUOT:
      return "EDQUOT";
    case EFBIG:
      return "EFBIG";
    case EROFS:
      return "EROFS";
    case EISDIR:
      return "EISDIR";
    case EINVAL:
      return "EINVAL";
    case EPERM:
      return "EPERM";
    case EACCES:
      return "EACCES";
    default:
      return "EIO";
  }
}

struct Copied {
  int64_t bytes = 0;
  int error = 0;  // errno of the failed call, 0 when none
  const char* syscall = "";
};

#if !defined(_WIN32)
// The portable loop: pread from the input, pwrite to the output.
void CopyLoop(int in, int out, int64_t offset, int64_t to, int64_t max, Copied& r) {
  std::vector<char> buf(1 << 20);
  while (r.bytes < max) {
    const size_t want = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(buf.size()), max - r.bytes));
    const ssize_t n = pread(in, buf.data(), want, static_cast<off_t>(offset + r.bytes));
    if (n < 0) {
      if (errno == EINTR) continue;
      r.error = errno;
      r.syscall = "read";
      return;
    }
    if (n == 0) return;
    ssize_t done = 0;
    while (done < n) {
      const ssize_t w = pwrite(out, buf.data() + done, static_cast<size_t>(n - done), static_cast<off_t>(to + r.bytes + done));
      if (w < 0) {
        if (errno == EINTR) continue;
        r.error = errno;
        r.syscall = "pwrite";
        return;
      }
      done += w;
    }
    r.bytes += n;
  }
}
#endif

Copied CopyRange(int in, int out, int64_t offset, int64_t to, int64_t max) {
  Copied r;
#if defined(__linux__) && defined(SYS_copy_file_range)
  bool kernel = true;
  while (kernel && r.bytes < max) {
    loff_t from = static_cast<loff_t>(offset + r.bytes);
    loff_t dest = static_cast<loff_t>(to + r.bytes);
    const size_t want = static_cast<size_t>(std::min<int64_t>(max - r.bytes, int64_t{1} << 30));
    const ssize_t n = syscall(SYS_copy_file_range, in, &from, out, &dest, want, 0u);
    if (n < 0) {
      if (errno == EINTR) continue;
      // Not possible here (old kernel, another file system, special files): the loop does it.
      if (errno == ENOSYS || errno == EXDEV || errno == EINVAL || errno == EOPNOTSUPP || errno == ETXTBSY) {
        kernel = false;
        break;
      }
      r.error = errno;
      r.syscall = "copy_file_range";
      return r;
    }
    if (n == 0) return r;  // the input's end
    r.bytes += n;
  }
  if (r.bytes >= max) return r;
#endif
#if !defined(_WIN32)
  CopyLoop(in, out, offset, to, max, r);
#else
  r.error = ENOSYS;
  r.syscall = "copy_file_range";
#endif
  return r;
}

Napi::Error ErrorOf(Napi::Env env, const Copied& r) {
  Napi::Error err = Napi::Error::New(env, std::string(ErrnoName(r.error)) + ": " + std::strerror(r.error) + ", " + r.syscall);
  err.Set("code", Napi::String::New(env, ErrnoName(r.error)));
  err.Set("errno", Napi::Number::New(env, -r.error));
  err.Set("syscall", Napi::String::New(env, r.syscall));
  return err;
}

bool Args(const Napi::CallbackInfo& info, int& in, int& out, int64_t& offset, int64_t& to, int64_t& max) {
  Napi::Env env = info.Env();
  for (size_t i = 0; i < 5; i++) {
    if (info.Length() <= i || !info[i].IsNumber()) {
      Napi::TypeError::New(env, "copyRange(inFd, outFd, inOffset, outOffset, maxLength): numbers expected").ThrowAsJavaScriptException();
      return false;
    }
  }
  in = info[0].As<Napi::Number>().Int32Value();
  out = info[1].As<Napi::Number>().Int32Value();
  offset = info[2].As<Napi::Number>().Int64Value();
  to = info[3].As<Napi::Number>().Int64Value();
  max = info[4].As<Napi::Number>().Int64Value();
  if (in < 0 || out < 0 || offset < 0 || to < 0 || max < 0) {
    Napi::RangeError::New(env, "copyRange: negative argument").ThrowAsJavaScriptException();
    return false;
  }
  return true;
}

Napi::Value CopyRangeSync(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int in = 0, out = 0;
  int64_t offset = 0, to = 0, max = 0;
  if (!Args(info, in, out, offset, to, max)) return env.Undefined();
  const Copied r = CopyRange(in, out, offset, to, max);
  if (r.error != 0) {
    ErrorOf(env, r).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  return Napi::Number::New(env, static_cast<double>(r.bytes));
}

class CopyWorker : public Napi::AsyncWorker {
 public:
  CopyWorker(Napi::Function& callback, int in, int out, int64_t offset, int64_t to, int64_t max)
      : Napi::AsyncWorker(callback, "optmark:copyRange"), in_(in), out_(out), offset_(offset), to_(to), max_(max) {}

  void Execute() override { result_ = CopyRange(in_, out_, offset_, to_, max_); }

  void OnOK() override {
    Napi::Env env = Env();
    if (result_.error != 0) {
      Callback().Call({ErrorOf(env, result_).Value()});
    } else {
      Callback().Call({env.Null(), Napi::Number::New(env, static_cast<double>(result_.bytes))});
    }
  }

 private:
  int in_;
  int out_;
  int64_t offset_;
  int64_t to_;
  int64_t max_;
  Copied result_;
};

Napi::Value CopyRangeAsync(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int in = 0, out = 0;
  int64_t offset = 0, to = 0, max = 0;
  if (!Args(info, in, out, offset, to, max)) return env.Undefined();
  if (info.Length() < 6 || !info[5].IsFunction()) {
    Napi::TypeError::New(env, "copyRangeAsync: a callback expected").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Napi::Function callback = info[5].As<Napi::Function>();
  (new CopyWorker(callback, in, out, offset, to, max))->Queue();
  return env.Undefined();
}

Napi::Value Kernel(const Napi::CallbackInfo& info) {
#if defined(__linux__) && defined(SYS_copy_file_range)
  return Napi::String::New(info.Env(), "copy_file_range");
#else
  return Napi::String::New(info.Env(), "loop");
#endif
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("copyRange", Napi::Function::New(env, CopyRangeSync, "copyRange"));
  exports.Set("copyRangeAsync", Napi::Function::New(env, CopyRangeAsync, "copyRangeAsync"));
  exports.Set("simd", Napi::Function::New(env, Kernel, "simd"));
  return exports;
}

}  // namespace

NODE_API_MODULE(optmark_files, Init)
