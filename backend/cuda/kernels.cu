// The backend's memory-bound kernels: random init, streaming stand-ins for norms and activations,
// gradient fills, the embedding scatter-add, and the fused optimizers.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels.hpp"

namespace dpsim::backend::cuda {

namespace {

void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) throw std::runtime_error(std::string("CUDA kernel ") + what + ": " + cudaGetErrorString(err));
}

__host__ __device__ inline uint64_t mix64(uint64_t x) {  // splitmix64 finalizer
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [-scale, -scale/64] U [scale/64, scale]: bounded away from zero.
__host__ __device__ inline float random_value(uint64_t seed, int64_t i, float scale) {
  const uint64_t h = mix64(seed * 0x632BE59BD9B4E019ull + static_cast<uint64_t>(i));
  const float u = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);  // [0,1)
  const float mag = 1.0f / 64.0f + u * (1.0f - 1.0f / 64.0f);
  return ((h >> 20) & 1u) ? scale * mag : -scale * mag;
}

template <typename T>
__device__ inline float to_f(T x) {
  return static_cast<float>(x);
}
template <>
__device__ inline float to_f<__nv_bfloat16>(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <>
__device__ inline float to_f<__half>(__half x) {
  return __half2float(x);
}
template <typename T>
__device__ inline T from_f(float x);
template <>
__device__ inline float from_f<float>(float x) {
  return x;
}
template <>
__device__ inline __nv_bfloat16 from_f<__nv_bfloat16>(float x) {
  return __float2bfloat16(x);
}
template <>
__device__ inline __half from_f<__half>(float x) {
  return __float2half(x);
}

__device__ inline void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ inline void atomic_add(__half* p, float v) { atomicAdd(p, __float2half(v)); }
__device__ inline void atomic_add(__nv_bfloat16* p, float v) { atomicAdd(p, __float2bfloat16(v)); }

constexpr int kThreads = 256;

// Enough blocks to fill the current device (its SMs x resident blocks per SM); the kernels grid-stride beyond.
int64_t resident_blocks() {
  int device = 0, sms = 0, threads_per_sm = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  cudaDeviceGetAttribute(&threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device);
  return std::max<int64_t>(1, static_cast<int64_t>(sms) * std::max(1, threads_per_sm / kThreads));
}

unsigned blocks_for(int64_t n, int threads = kThreads) {
  static thread_local int64_t cap = resident_blocks();
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::clamp<int64_t>(b, 1, cap));
}

// Vector access: 16 bytes per load where the pointers allow it (V elements of T), the scalar tail after.
template <typename T>
constexpr int kVec = 16 / static_cast<int>(sizeof(T));

template <typename T>
struct alignas(16) Vec {
  T v[kVec<T>];
};

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

#define GRID_STRIDE(i, n)                                                                \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

template <typename T>
__global__ void k_fill_random(T* d, int64_t n, uint64_t seed, float scale) {
  GRID_STRIDE(i, n) d[i] = from_f<T>(random_value(seed, i, scale));
}

template <typename T>
__global__ void k_to_f32(const T* s, float* d, int64_t n) {
  GRID_STRIDE(i, n) d[i] = to_f(s[i]);
}

// dst = src * a + b over n elements, 16-byte vectors (both pointers 16-byte aligned) then the tail.
template <typename T>
__global__ void k_axpb(const T* src, T* dst, int64_t n, float a, float b) {
  constexpr int V = kVec<T>;
  const int64_t nv = n / V;
  const auto* sv = reinterpret_cast<const Vec<T>*>(src);
  auto* dv = reinterpret_cast<Vec<T>*>(dst);
  GRID_STRIDE(i, nv) {
    Vec<T> x = sv[i];
#pragma unroll
    for (int j = 0; j < V; ++j) x.v[j] = from_f<T>(to_f(x.v[j]) * a + b);
    dv[i] = x;
  }
  GRID_STRIDE(i, n - nv * V) dst[nv * V + i] = from_f<T>(to_f(src[nv * V + i]) * a + b);
}

template <typename T>
__global__ void k_axpb_scalar(const T* src, T* dst, int64_t n, float a, float b) {
  GRID_STRIDE(i, n) dst[i] = from_f<T>(to_f(src[i]) * a + b);
}

template <typename T>
void launch_axpb(const T* src, T* dst, int64_t n, float a, float b, cudaStream_t s) {
  if (aligned16(src) && aligned16(dst))
    k_axpb<T><<<blocks_for(n / kVec<T> + 1), kThreads, 0, s>>>(src, dst, n, a, b);
  else
    k_axpb_scalar<T><<<blocks_for(n), kThreads, 0, s>>>(src, dst, n, a, b);
}

template <typename T>
__global__ void k_grad_fill(T* g, int64_t n, const T* src, int64_t src_n, const T* x, int64_t x_n, bool acc) {
  GRID_STRIDE(i, n) {
    float v = to_f(src[i % src_n]) * to_f(x[i % x_n]);
    if (acc) v += to_f(g[i]);
    g[i] = from_f<T>(v);
  }
}

template <typename T>
__global__ void k_scatter_add(T* g, int64_t rows, int64_t width, const T* dy, int64_t dy_n, int64_t tokens,
                              uint64_t seed) {
  const int64_t total = tokens * width;
  GRID_STRIDE(i, total) {
    const int64_t t = i / width, j = i % width;
    const auto row = static_cast<int64_t>(mix64(seed + static_cast<uint64_t>(t)) % static_cast<uint64_t>(rows));
    atomic_add(&g[row * width + j], to_f(dy[i % dy_n]));
  }
}

// Four consecutive elements: one 8-byte (16-bit T) or 16-byte (fp32) access. Callers keep i a multiple of 4
// from 16-byte-aligned bases.
template <typename T>
struct alignas(4 * sizeof(T)) Four {
  T v[4];
};

struct AdamArgs {
  float lr, b1, b2, eps, wd, bc1, bc2;
};

// The updated parameters of four elements: the fp32 master copy where there is one, and the weights in their dtype.
template <typename T>
__device__ inline void store_weights(T* w, float* master, int64_t i, const float4& p) {
  if (master) reinterpret_cast<float4*>(master)[i] = p;
  Four<T> wi;
  wi.v[0] = from_f<T>(p.x);
  wi.v[1] = from_f<T>(p.y);
  wi.v[2] = from_f<T>(p.z);
  wi.v[3] = from_f<T>(p.w);
  reinterpret_cast<Four<T>*>(w)[i] = wi;
}

__device__ inline float adam_one(float g, float& m, float& v, float p, const AdamArgs& a) {
  m = a.b1 * m + (1.0f - a.b1) * g;
  v = a.b2 * v + (1.0f - a.b2) * g * g;
  return p - a.lr * ((m / a.bc1) / (sqrtf(v / a.bc2) + a.eps) + a.wd * p);
}

template <typename T>
__global__ void k_adamw(T* w, const T* g, float* master, float* m, float* v, int64_t n, AdamArgs a) {
  const int64_t n4 = n / 4;
  GRID_STRIDE(i, n4) {
    const Four<T> gi = reinterpret_cast<const Four<T>*>(g)[i];
    float4 mi = reinterpret_cast<float4*>(m)[i], vi = reinterpret_cast<float4*>(v)[i];
    const Four<T> wi = reinterpret_cast<const Four<T>*>(w)[i];
    float4 p = master ? reinterpret_cast<float4*>(master)[i]
                      : make_float4(to_f(wi.v[0]), to_f(wi.v[1]), to_f(wi.v[2]), to_f(wi.v[3]));
    p.x = adam_one(to_f(gi.v[0]), mi.x, vi.x, p.x, a);
    p.y = adam_one(to_f(gi.v[1]), mi.y, vi.y, p.y, a);
    p.z = adam_one(to_f(gi.v[2]), mi.z, vi.z, p.z, a);
    p.w = adam_one(to_f(gi.v[3]), mi.w, vi.w, p.w, a);
    reinterpret_cast<float4*>(m)[i] = mi;
    reinterpret_cast<float4*>(v)[i] = vi;
    store_weights(w, master, i, p);
  }
  GRID_STRIDE(t, n - n4 * 4) {
    const int64_t i = n4 * 4 + t;
    const float p = master ? master[i] : to_f(w[i]);
    const float np = adam_one(to_f(g[i]), m[i], v[i], p, a);
    if (master) master[i] = np;
    w[i] = from_f<T>(np);
  }
}

__device__ inline float sgd_one(float g, float* mom, float p, float lr, float mu, float wd) {
  float d = g + wd * p;
  if (mom) {
    d = mu * *mom + d;
    *mom = d;
  }
  return p - lr * d;
}

template <typename T>
__global__ void k_sgd(T* w, const T* g, float* master, float* mom, int64_t n, float lr, float mu, float wd) {
  const int64_t n4 = n / 4;
  GRID_STRIDE(i, n4) {
    const Four<T> gi = reinterpret_cast<const Four<T>*>(g)[i];
    const Four<T> wi = reinterpret_cast<const Four<T>*>(w)[i];
    float4 p = master ? reinterpret_cast<float4*>(master)[i]
                      : make_float4(to_f(wi.v[0]), to_f(wi.v[1]), to_f(wi.v[2]), to_f(wi.v[3]));
    float4 mm = mom ? reinterpret_cast<float4*>(mom)[i] : make_float4(0, 0, 0, 0);
    float* const mp = mom ? &mm.x : nullptr;
    p.x = sgd_one(to_f(gi.v[0]), mp, p.x, lr, mu, wd);
    p.y = sgd_one(to_f(gi.v[1]), mp ? &mm.y : nullptr, p.y, lr, mu, wd);
    p.z = sgd_one(to_f(gi.v[2]), mp ? &mm.z : nullptr, p.z, lr, mu, wd);
    p.w = sgd_one(to_f(gi.v[3]), mp ? &mm.w : nullptr, p.w, lr, mu, wd);
    if (mom) reinterpret_cast<float4*>(mom)[i] = mm;
    store_weights(w, master, i, p);
  }
  GRID_STRIDE(t, n - n4 * 4) {
    const int64_t i = n4 * 4 + t;
    const float p = master ? master[i] : to_f(w[i]);
    const float np = sgd_one(to_f(g[i]), mom ? &mom[i] : nullptr, p, lr, mu, wd);
    if (master) master[i] = np;
    w[i] = from_f<T>(np);
  }
}

bool optimizer_aligned(const void* w, const void* g, const void* master, const void* m, const void* v) {
  for (const void* p : {w, g, master, m, v})
    if (p && !aligned16(p)) return false;
  return true;
}

template <typename F>
void dispatch(Elem e, F&& f) {
  switch (e) {
    case Elem::bf16: f(static_cast<__nv_bfloat16*>(nullptr)); break;
    case Elem::fp16: f(static_cast<__half*>(nullptr)); break;
    case Elem::fp32: f(static_cast<float*>(nullptr)); break;
  }
}

}  // namespace

int elem_bytes(Elem e) { return e == Elem::fp32 ? 4 : 2; }

#ifndef DPSIM_CUDA_ARCHITECTURES
#define DPSIM_CUDA_ARCHITECTURES "unknown"
#endif
const char* built_architectures() { return DPSIM_CUDA_ARCHITECTURES; }

KernelImage loaded_kernel_image() {
  cudaFuncAttributes attr{};
  const cudaError_t err = cudaFuncGetAttributes(&attr, k_axpb<float>);
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("this GPU cannot load dpsim's kernels (built for ") +
                             DPSIM_CUDA_ARCHITECTURES + "): " + cudaGetErrorString(err));
  return {attr.binaryVersion, attr.ptxVersion};
}

float host_random(uint64_t seed, int64_t index, float scale) { return random_value(seed, index, scale); }

float round_to(Elem e, float x) {
  switch (e) {
    case Elem::bf16: return __bfloat162float(__float2bfloat16(x));
    case Elem::fp16: return __half2float(__float2half(x));
    case Elem::fp32: return x;
  }
  return x;
}

void fill_random(Elem e, void* data, int64_t n, uint64_t seed, float scale, cudaStream_t s) {
  if (n <= 0) return;
  dispatch(e, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    k_fill_random<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<T*>(data), n, seed, scale);
  });
  check_launch("fill_random");
}

void fill_random_f32(float* data, int64_t n, uint64_t seed, float scale, cudaStream_t s) {
  if (n <= 0) return;
  k_fill_random<float><<<blocks_for(n), kThreads, 0, s>>>(data, n, seed, scale);
  check_launch("fill_random_f32");
}

void fill_zero(void* data, int64_t bytes, cudaStream_t s) {
  if (bytes <= 0) return;
  const cudaError_t err = cudaMemsetAsync(data, 0, static_cast<size_t>(bytes), s);
  if (err != cudaSuccess) throw std::runtime_error(std::string("cudaMemsetAsync: ") + cudaGetErrorString(err));
}

void convert_to_f32(Elem e, const void* src, float* dst, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  dispatch(e, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    k_to_f32<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(src), dst, n);
  });
  check_launch("convert_to_f32");
}

void stream_rw(Elem e, Ring& src, Ring& dst, int64_t n, cudaStream_t s) {
  if (n <= 0 || src.n <= 0 || dst.n <= 0) return;
  const int eb = elem_bytes(e);
  const int64_t step = 16 / eb;  // cursors stay on 16-byte boundaries: every chunk runs vectorized
  for (int64_t done = 0; done < n;) {
    if (src.cursor >= src.n) src.cursor = 0;
    if (dst.cursor >= dst.n) dst.cursor = 0;
    const int64_t len = std::min({n - done, src.n - src.cursor, dst.n - dst.cursor});
    dispatch(e, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      launch_axpb<T>(static_cast<const T*>(src.base) + src.cursor, static_cast<T*>(dst.base) + dst.cursor, len, 0.999f,
                     1e-3f, s);
    });
    check_launch("stream_rw");
    done += len;
    src.cursor += (len + step - 1) / step * step;
    dst.cursor += (len + step - 1) / step * step;
  }
}

void grad_fill(Elem e, void* grad, int64_t n, const void* src, int64_t src_n, const void* x, int64_t x_n, bool acc,
               cudaStream_t s) {
  if (n <= 0) return;
  dispatch(e, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    k_grad_fill<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<T*>(grad), n, static_cast<const T*>(src),
                                                      std::max<int64_t>(1, src_n), static_cast<const T*>(x),
                                                      std::max<int64_t>(1, x_n), acc);
  });
  check_launch("grad_fill");
}

void embedding_scatter_add(Elem e, void* grad, int64_t rows, int64_t width, const void* dy, int64_t dy_n,
                           int64_t tokens, uint64_t seed, bool acc, cudaStream_t s) {
  if (rows <= 0 || width <= 0) return;
  if (!acc) fill_zero(grad, rows * width * elem_bytes(e), s);
  const int64_t total = tokens * width;
  if (total <= 0) return;
  dispatch(e, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    k_scatter_add<T><<<blocks_for(total), kThreads, 0, s>>>(
        static_cast<T*>(grad), rows, width, static_cast<const T*>(dy), std::max<int64_t>(1, dy_n), tokens, seed);
  });
  check_launch("embedding_scatter_add");
}

void copy(void* dst, const void* src, int64_t bytes, cudaStream_t s) {
  if (bytes <= 0) return;
  const cudaError_t err = cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, s);
  if (err != cudaSuccess) throw std::runtime_error(std::string("cudaMemcpyAsync: ") + cudaGetErrorString(err));
}

void scale(Elem e, void* data, int64_t n, float factor, cudaStream_t s) { copy_scaled(e, data, data, n, factor, s); }

void copy_scaled(Elem e, void* dst, const void* src, int64_t n, float factor, cudaStream_t s) {
  if (n <= 0) return;
  dispatch(e, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    launch_axpb<T>(static_cast<const T*>(src), static_cast<T*>(dst), n, factor, 0.0f, s);
  });
  check_launch("copy_scaled");
}

void adamw_step(Elem e, void* weights, const void* grad, float* master, float* m, float* v, int64_t n, int step,
                const AdamW& hp, cudaStream_t s) {
  if (n <= 0) return;
  const float bc1 = 1.0f - std::pow(hp.beta1, static_cast<float>(step));
  const float bc2 = 1.0f - std::pow(hp.beta2, static_cast<float>(step));
  dispatch(e, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (!optimizer_aligned(weights, grad, master, m, v))
      throw std::runtime_error("adamw_step: buffers must be 16-byte aligned (the vectorized kernel)");
    k_adamw<T><<<blocks_for(n / 4 + 1), kThreads, 0, s>>>(
        static_cast<T*>(weights), static_cast<const T*>(grad), master, m, v, n,
        AdamArgs{hp.lr, hp.beta1, hp.beta2, hp.eps, hp.weight_decay, bc1, bc2});
  });
  check_launch("adamw_step");
}

void sgd_step(Elem e, void* weights, const void* grad, float* master, float* momentum, int64_t n, float lr, float mu,
              float wd, cudaStream_t s) {
  if (n <= 0) return;
  dispatch(e, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (!optimizer_aligned(weights, grad, master, momentum, nullptr))
      throw std::runtime_error("sgd_step: buffers must be 16-byte aligned (the vectorized kernel)");
    k_sgd<T><<<blocks_for(n / 4 + 1), kThreads, 0, s>>>(static_cast<T*>(weights), static_cast<const T*>(grad), master,
                                                        momentum, n, lr, mu, wd);
  });
  check_launch("sgd_step");
}

}  // namespace dpsim::backend::cuda
