// N-API surface of the fingerprint cores: detectCore(input) (version 1), detectCore2(input) and simd(). Context-aware (Napi::Addon), so
// it loads in every worker thread; the core keeps no per-call state outside the call.
#include <napi.h>

#include <vector>

#include "v1.h"
#include "v2.h"

namespace {

constexpr int kMaxSide = 1 << 14;

bool Fail(Napi::Env env, const char* msg) {
  Napi::TypeError::New(env, msg).ThrowAsJavaScriptException();
  return false;
}

bool GetInt(Napi::Object o, const char* key, int lo, int hi, int& out) {
  Napi::Value v = o.Get(key);
  if (!v.IsNumber()) return Fail(o.Env(), "detectCore: a numeric field is missing");
  const double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= lo && d <= hi) || d != static_cast<int>(d)) return Fail(o.Env(), "detectCore: an integer field is out of range");
  out = static_cast<int>(d);
  return true;
}

bool GetDouble(Napi::Object o, const char* key, double& out) {
  Napi::Value v = o.Get(key);
  if (!v.IsNumber()) return Fail(o.Env(), "detectCore: a numeric parameter is missing");
  out = v.As<Napi::Number>().DoubleValue();
  return true;
}

template <typename T, napi_typedarray_type Type>
bool GetArray(Napi::Object o, const char* key, size_t length, const T*& out) {
  Napi::Value v = o.Get(key);
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != Type) return Fail(o.Env(), "detectCore: a typed-array field has the wrong type");
  auto a = v.As<Napi::TypedArrayOf<T>>();
  if (a.ElementLength() < length) return Fail(o.Env(), "detectCore: a typed array is too short");
  out = a.Data();
  return true;
}

// An optional Float32Array of at least `length` elements (absent or undefined: nullptr).
bool GetOptionalArray(Napi::Object o, const char* key, size_t length, const float*& out) {
  out = nullptr;
  if (o.Get(key).IsUndefined()) return true;
  return GetArray<float, napi_float32_array>(o, key, length, out);
}

class FingerprintAddon : public Napi::Addon<FingerprintAddon> {
 public:
  FingerprintAddon(Napi::Env env, Napi::Object exports) {
    DefineAddon(exports, {InstanceMethod("detectCore", &FingerprintAddon::DetectCore), InstanceMethod("detectCore2", &FingerprintAddon::DetectCore2),
                          InstanceMethod("simd", &FingerprintAddon::Simd)});
  }

 private:
  // One call per image: every input is read into a plain struct before the core runs.
  Napi::Value DetectCore(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsObject()) {
      Fail(env, "detectCore: expected an input object");
      return env.Undefined();
    }
    Napi::Object o = info[0].As<Napi::Object>();
    optmark::CoreIn in{};
    optmark::CoreParams p{};
    Napi::Value pv = o.Get("params");
    if (!pv.IsObject()) {
      Fail(env, "detectCore: params missing");
      return env.Undefined();
    }
    Napi::Object po = pv.As<Napi::Object>();
    if (!GetInt(o, "width", 2, kMaxSide, in.width) || !GetInt(o, "height", 2, kMaxSide, in.height) || !GetInt(o, "channels", 1, 4, in.channels) ||
        !GetInt(po, "cell", 1, optmark::kTile, p.cell) || !GetDouble(po, "scaleMin", p.scaleMin) || !GetDouble(po, "scaleStep", p.scaleStep) ||
        !GetDouble(po, "tier1Z", p.tier1Z) || !GetInt(po, "fullScales", 1, 64, p.fullScales) || !GetDouble(po, "refineZ", p.refineZ) ||
        !GetDouble(po, "sigmaHighpass", p.sigmaHighpass) || !GetDouble(po, "sigmaLocal", p.sigmaLocal) || !GetDouble(po, "localFloor", p.localFloor)) {
      return env.Undefined();
    }
    if (optmark::kTile % p.cell != 0 || !(p.scaleStep > 0.001) || !(p.scaleMin > 0.3 && p.scaleMin <= 1) || !(p.sigmaHighpass > 0 && p.sigmaHighpass < 50) ||
        !(p.sigmaLocal > 0 && p.sigmaLocal < 50)) {
      Fail(env, "detectCore: parameters out of range");
      return env.Undefined();
    }
    const size_t n = size_t(in.width) * in.height;
    if (!GetArray<uint8_t, napi_uint8_array>(o, "pixels", n * in.channels, in.pixels) ||
        !GetArray<float, napi_float32_array>(o, "sync", optmark::kTile2, in.sync) ||
        !GetArray<float, napi_float32_array>(o, "count", optmark::kTile2, in.count) || !GetOptionalArray(o, "prefiltered", n, in.prefiltered)) {
      return env.Undefined();
    }
    const int per = optmark::kTile / p.cell;
    Napi::Float64Array cells = Napi::Float64Array::New(env, size_t(per) * per);
    optmark::CoreOut out{};
    out.cells = cells.Data();
    optmark::DetectCore(in, p, out);

    Napi::Object r = Napi::Object::New(env);
    r.Set("scale", out.scale);
    r.Set("dx", out.dx);
    r.Set("dy", out.dy);
    r.Set("syncZ", out.syncZ);
    r.Set("coarseZ", out.coarseZ);
    r.Set("tier", out.tier);
    r.Set("cells", cells);
    return r;
  }

  // Version 2 (src/fingerprint/v2/): the same contract as detectCore, with the lattice search.
  Napi::Value DetectCore2(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsObject()) {
      Fail(env, "detectCore2: expected an input object");
      return env.Undefined();
    }
    Napi::Object o = info[0].As<Napi::Object>();
    Napi::Value pv = o.Get("params");
    if (!pv.IsObject()) {
      Fail(env, "detectCore2: params missing");
      return env.Undefined();
    }
    Napi::Object po = pv.As<Napi::Object>();
    optmark::Core2In in{};
    optmark::Core2Params p{};
    if (!GetInt(o, "width", 8, kMaxSide, in.width) || !GetInt(o, "height", 8, kMaxSide, in.height) || !GetInt(o, "channels", 1, 4, in.channels) ||
        !GetInt(o, "workShort", 8, kMaxSide, in.workShort) || !GetInt(o, "native", 0, 1, in.native) || !GetInt(po, "period", 8, optmark::kTile, p.period) ||
        !GetInt(po, "cell", 1, optmark::kTile, p.cell) || !GetInt(po, "candidates", 0, 16, p.candidates) || !GetInt(po, "runners", 0, 16, p.runners) ||
        !GetInt(po, "identityLooks", 0, 16, p.identityLooks) || !GetInt(po, "phaseLooks", 0, 15, p.phaseLooks) ||
        !GetInt(po, "latticeLooks", 0, 16, p.latticeLooks) || !GetDouble(po, "latticeLookZ", p.latticeLookZ) || !GetDouble(po, "fastZ", p.fastZ) ||
        !GetDouble(po, "gate", p.gate) || !GetDouble(po, "refineZ", p.refineZ) || !GetDouble(po, "phasesZ", p.phasesZ) ||
        !GetDouble(po, "secondT", p.secondT) || !GetDouble(po, "aspectGate", p.aspectGate) || !GetDouble(po, "rotationGate", p.rotationGate) ||
        !GetDouble(po, "runnerZ", p.runnerZ) || !GetDouble(po, "syncPower", p.syncPower) || !GetDouble(po, "sameAsIdentity", p.sameAsIdentity) ||
        !GetDouble(po, "pMin", p.pMin) || !GetDouble(po, "pMax", p.pMax) || !GetDouble(po, "angle", p.angle) ||
        !GetDouble(po, "sigmaHighpass", p.sigmaHighpass) || !GetDouble(po, "sigmaLocal", p.sigmaLocal) || !GetDouble(po, "localFloor", p.localFloor) ||
        !GetDouble(po, "energyFloor", p.energyFloor)) {
      return env.Undefined();
    }
    const bool pow2 = (p.period & (p.period - 1)) == 0;
    if (!pow2 || optmark::kTile % p.period != 0 || optmark::kTile % p.cell != 0 || !(p.pMin > 1 && p.pMax > p.pMin && p.pMax < 4096) ||
        !(p.angle >= 0 && p.angle <= 45) || !(p.syncPower >= 0 && p.syncPower <= 1) || !(p.sigmaHighpass > 0 && p.sigmaHighpass < 50) ||
        !(p.sigmaLocal > 0 && p.sigmaLocal < 50) || !(p.energyFloor > 0 && p.energyFloor < 1e6)) {
      Fail(env, "detectCore2: parameters out of range");
      return env.Undefined();
    }
    Napi::Value hv = o.Get("harmonics");
    if (!hv.IsTypedArray() || hv.As<Napi::TypedArray>().TypedArrayType() != napi_float64_array) {
      Fail(env, "detectCore2: harmonics must be a Float64Array");
      return env.Undefined();
    }
    auto harm = hv.As<Napi::Float64Array>();
    if (harm.ElementLength() % 2 != 0 || harm.ElementLength() > 256) {
      Fail(env, "detectCore2: harmonics must hold (m1, m2) pairs");
      return env.Undefined();
    }
    in.harmonics = harm.Data();
    in.nHarmonics = int(harm.ElementLength() / 2);
    const size_t n = size_t(in.width) * in.height;
    if (!GetArray<uint8_t, napi_uint8_array>(o, "pixels", n * in.channels, in.pixels) ||
        !GetArray<float, napi_float32_array>(o, "a", size_t(p.period) * p.period, in.a) ||
        !GetArray<float, napi_float32_array>(o, "b", optmark::kTile2, in.b) || !GetArray<float, napi_float32_array>(o, "c", optmark::kTile2, in.c)) {
      return env.Undefined();
    }
    const float* keep = nullptr;
    if (!GetOptionalArray(o, "keepPrefiltered", n, keep)) return env.Undefined();
    in.prefilteredOut = const_cast<float*>(keep);
    const int per = optmark::kTile / p.cell;
    Napi::Float64Array cells = Napi::Float64Array::New(env, size_t(per) * per);
    optmark::Core2Out out{};
    out.cells = cells.Data();
    optmark::DetectCore2(in, p, out);
    Napi::Float64Array lattice = Napi::Float64Array::New(env, 4);
    for (int i = 0; i < 4; i++) lattice[i] = out.lattice[i];
    Napi::Object r = Napi::Object::New(env);
    r.Set("lattice", lattice);
    r.Set("dihedral", out.dihedral);
    r.Set("dx", out.dx);
    r.Set("dy", out.dy);
    r.Set("syncZ", out.syncZ);
    r.Set("phaseZ", out.phaseZ);
    r.Set("tier", out.tier);
    r.Set("candidates", out.candidates);
    r.Set("combScore", out.combScore);
    r.Set("aspectScore", out.aspectScore);
    r.Set("rotationScore", out.rotationScore);
    r.Set("cells", cells);
    auto setArray = [&](const char* name, const std::vector<double>& v) {
      Napi::Float64Array a = Napi::Float64Array::New(env, v.size());
      std::copy(v.begin(), v.end(), a.Data());
      r.Set(name, a);
    };
    setArray("phaseCells", out.phaseCells);
    setArray("refinedCells", out.refinedCells);
    r.Set("refinedSyncZ", out.refinedSyncZ);
    setArray("runnerCells", out.runnerCells);
    setArray("runnerZ", out.runnerZ);
    setArray("identityCells", out.identityCells);
    setArray("identityZ", out.identityZ);
    setArray("latticeCells", out.latticeCells);
    setArray("latticeZ", out.latticeZ);
    return r;
  }

  Napi::Value Simd(const Napi::CallbackInfo& info) { return Napi::String::New(info.Env(), optmark::SimdPath()); }
};

}  // namespace

NODE_API_ADDON(FingerprintAddon)
