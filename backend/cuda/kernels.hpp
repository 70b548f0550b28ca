#pragma once
// Host entry points of the backend's CUDA kernels (kernels.cu). Plain C++: pointers are void* to
// elements of `Elem`; every launch goes to `stream` and checks the launch error.
#include <cstdint>

#include <cuda_runtime_api.h>

namespace dpsim::backend::cuda {

enum class Elem { bf16, fp16, fp32 };
int elem_bytes(Elem e);

// Deterministic uniform values in [-scale, scale] from (seed, index): never zeros.
void fill_random(Elem e, void* data, int64_t n, uint64_t seed, float scale, cudaStream_t stream);
void fill_random_f32(float* data, int64_t n, uint64_t seed, float scale, cudaStream_t stream);
void fill_zero(void* data, int64_t bytes, cudaStream_t stream);
// fp32 master copy of the weights (to_f32) and back (from_f32).
void convert_to_f32(Elem e, const void* src, float* dst, int64_t n, cudaStream_t stream);

// The architectures compiled into this binary ("80-real 86-real ... 100-virtual", CMake's syntax).
const char* built_architectures();
// What the current device runs of them: binaryVersion 90 = sm_90 machine code (cudaFuncGetAttributes).
struct KernelImage {
  int binary_version = 0;
  int ptx_version = 0;
};
KernelImage loaded_kernel_image();

// A buffer walked by successive memory-bound kernels: each starts where the previous one ended (wrapping),
// so that small ops do not re-read the same L2-resident bytes.
struct Ring {
  void* base = nullptr;
  int64_t n = 0;       // elements
  int64_t cursor = 0;  // next element (kept on 16-byte boundaries)
};

// Memory-bound stand-in for norms/activations/gathers: reads n elements of src, writes n of dst
// (dst[i] = src[i] * a + b, 16-byte vector accesses), from each ring's cursor on, advancing both.
void stream_rw(Elem e, Ring& src, Ring& dst, int64_t n, cudaStream_t stream);

// A gradient with no GEMM (norm weights, biases): grad[i] (+)= src[i % src_n] * x[i % x_n].
void grad_fill(Elem e, void* grad, int64_t n, const void* src, int64_t src_n, const void* x, int64_t x_n,
               bool accumulate, cudaStream_t stream);

// Embedding backward: (zero the dense gradient unless accumulating, then) scatter-add `tokens`
// rows of `width` elements of dy into rows hash(seed, t) % rows of grad.
void embedding_scatter_add(Elem e, void* grad, int64_t rows, int64_t width, const void* dy, int64_t dy_n,
                           int64_t tokens, uint64_t seed, bool accumulate, cudaStream_t stream);

void copy(void* dst, const void* src, int64_t bytes, cudaStream_t stream);
// DDP's division by the world size: in place (gradients are bucket views: bucket.div_) or while copying the
// gradient into its bucket (at::mul_out(bucket_view, grad, 1/world)). 16-byte vector accesses where aligned.
void scale(Elem e, void* data, int64_t n, float factor, cudaStream_t stream);
void copy_scaled(Elem e, void* dst, const void* src, int64_t n, float factor, cudaStream_t stream);

struct AdamW {
  float lr = 1e-4f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.01f;
};
// Fused AdamW over n parameters (four per thread, 16-byte-aligned buffers): reads grad (Elem), master/m/v (fp32),
// writes master/m/v and the Elem weights. `step` counts from 1. When master == nullptr, weights are fp32 and updated in
// place.
void adamw_step(Elem e, void* weights, const void* grad, float* master, float* m, float* v, int64_t n, int step,
                const AdamW& hp, cudaStream_t stream);
// SGD (momentum buffer optional): master -= lr * (mu*buf + g + wd*master).
void sgd_step(Elem e, void* weights, const void* grad, float* master, float* momentum, int64_t n, float lr, float mu,
              float weight_decay, cudaStream_t stream);

// Host mirrors for tests (same arithmetic as the kernels, fp32).
float host_random(uint64_t seed, int64_t index, float scale);
float round_to(Elem e, float x);  // the value after storing x in Elem

}  // namespace dpsim::backend::cuda
