// The backend's memory-bound kernels: random init, streaming stand-ins for norms and activations,
// gradient fills, the embedding scatter-add, and the fused optimizers.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
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

unsigned blocks_for(int64_t n, int threads = 256) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::clamp<int64_t>(b, 1, 132LL * 32));  // grid-stride beyond this
}

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

template <typename T>
__global__ void k_stream_rw(const T* src, T* dst, int64_t n) {
  GRID_STRIDE(i, n) dst[i] = from_f<T>(to_f(src[i]) * 0.999f + 1e-3f);
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

template <typename T>
__global__ void k_scale(T* d, int64_t n, float f) {
  GRID_STRIDE(i, n) d[i] = from_f<T>(to_f(d[i]) * f);
}

template <typename T>
__global__ void k_adamw(T* w, const T* g, float* master, float* m, float* v, int64_t n, float lr, float b1, float b2,
                        float eps, float wd, float bc1, float bc2) {
  GRID_STRIDE(i, n) {
    const float gi = to_f(g[i]);
    const float mi = b1 * m[i] + (1.0f - b1) * gi;
    const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float p = master ? master[i] : to_f(w[i]);
    const float upd = (mi / bc1) / (sqrtf(vi / bc2) + eps) + wd * p;
    const float np = p - lr * upd;
    if (master) master[i] = np;
    w[i] = from_f<T>(np);
  }
}

template <typename T>
__global__ void k_sgd(T* w, const T* g, float* master, float* mom, int64_t n, float lr, float mu, float wd) {
  GRID_STRIDE(i, n) {
    const float p = master ? master[i] : to_f(w[i]);
    float d = to_f(g[i]) + wd * p;
    if (mom) {
      d = mu * mom[i] + d;
      mom[i] = d;
    }
    const float np = p - lr * d;
    if (master) master[i] = np;
    w[i] = from_f<T>(np);
  }
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
    k_fill_random<T><<<blocks_for(n), 256, 0, s>>>(static_cast<T*>(data), n, seed, scale);
  });
  check_launch("fill_random");
}

void fill_random_f32(float* data, int64_t n, uint64_t seed, float scale, cudaStream_t s) {
  if (n <= 0) return;
  k_fill_random<float><<<blocks_for(n), 256, 0, s>>>(data, n, seed, scale);
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
    k_to_f32<T><<<blocks_for(n), 256, 0, s>>>(static_cast<const T*>(src), dst, n);
  });
  check_launch("convert_to_f32");
}

void stream_rw(Elem e, const void* src, int64_t src_n, void* dst, int64_t dst_n, int64_t n, cudaStream_t s) {
  if (n <= 0 || src_n <= 0 || dst_n <= 0) return;
  const int64_t chunk = std::min(src_n, dst_n);
  const int eb = elem_bytes(e);
  for (int64_t off = 0; off < n; off += chunk) {
    const int64_t len = std::min(chunk, n - off);
    dispatch(e, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      k_stream_rw<T><<<blocks_for(len), 256, 0, s>>>(static_cast<const T*>(src), static_cast<T*>(dst), len);
    });
    (void)eb;
    check_launch("stream_rw");
  }
}

void grad_fill(Elem e, void* grad, int64_t n, const void* src, int64_t src_n, const void* x, int64_t x_n, bool acc,
               cudaStream_t s) {
  if (n <= 0) return;
  dispatch(e, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    k_grad_fill<T><<<blocks_for(n), 256, 0, s>>>(static_cast<T*>(grad), n, static_cast<const T*>(src),
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
    k_scatter_add<T><<<blocks_for(total), 256, 0, s>>>(static_cast<T*>(grad), rows, width, static_cast<const T*>(dy),
                                                       std::max<int64_t>(1, dy_n), tokens, seed);
  });
  check_launch("embedding_scatter_add");
}

void copy(void* dst, const void* src, int64_t bytes, cudaStream_t s) {
  if (bytes <= 0) return;
  const cudaError_t err = cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, s);
  if (err != cudaSuccess) throw std::runtime_error(std::string("cudaMemcpyAsync: ") + cudaGetErrorString(err));
}

void scale(Elem e, void* data, int64_t n, float factor, cudaStream_t s) {
  if (n <= 0) return;
  dispatch(e, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    k_scale<T><<<blocks_for(n), 256, 0, s>>>(static_cast<T*>(data), n, factor);
  });
  check_launch("scale");
}

void adamw_step(Elem e, void* weights, const void* grad, float* master, float* m, float* v, int64_t n, int step,
                const AdamW& hp, cudaStream_t s) {
  if (n <= 0) return;
  const float bc1 = 1.0f - std::pow(hp.beta1, static_cast<float>(step));
  const float bc2 = 1.0f - std::pow(hp.beta2, static_cast<float>(step));
  dispatch(e, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    k_adamw<T><<<blocks_for(n), 256, 0, s>>>(static_cast<T*>(weights), static_cast<const T*>(grad), master, m, v, n,
                                             hp.lr, hp.beta1, hp.beta2, hp.eps, hp.weight_decay, bc1, bc2);
  });
  check_launch("adamw_step");
}

void sgd_step(Elem e, void* weights, const void* grad, float* master, float* momentum, int64_t n, float lr, float mu,
              float wd, cudaStream_t s) {
  if (n <= 0) return;
  dispatch(e, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    k_sgd<T><<<blocks_for(n), 256, 0, s>>>(static_cast<T*>(weights), static_cast<const T*>(grad), master, momentum, n,
                                           lr, mu, wd);
  });
  check_launch("sgd_step");
}

}  // namespace dpsim::backend::cuda
