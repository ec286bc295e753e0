# The faster version, written for the end-to-end test (not by a model): consecutive
# threads take consecutive float4s (coalesced 16-byte loads and stores) in a grid-stride
# loop over the whole tensor, one read and one write per element.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <c10/cuda/CUDAStream.h>

__global__ void scaled_relu_vec4(const float4* __restrict__ x, float4* __restrict__ y,
                                 float scale, long n4) {
    long stride = (long)gridDim.x * blockDim.x;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = x[i];
        v.x = fmaxf(v.x, 0.0f) * scale;
        v.y = fmaxf(v.y, 0.0f) * scale;
        v.z = fmaxf(v.z, 0.0f) * scale;
        v.w = fmaxf(v.w, 0.0f) * scale;
        y[i] = v;
    }
}

__global__ void scaled_relu_tail(const float* __restrict__ x, float* __restrict__ y,
                                 float scale, long start, long n) {
    long i = start + blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f) * scale;
}

torch::Tensor scaled_relu(torch::Tensor x, double scale) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "expected a float32 CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    long n = xc.numel();
    const float* xp = xc.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    auto stream = c10::cuda::getCurrentCUDAStream();
    bool aligned = ((reinterpret_cast<uintptr_t>(xp) | reinterpret_cast<uintptr_t>(yp)) & 15) == 0;
    long n4 = aligned ? n / 4 : 0;
    if (n4 > 0) {
        int threads = 256;
        long blocks = (n4 + threads - 1) / threads;
        int device = 0, sms = 0;
        cudaGetDevice(&device);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
        if (blocks > (long)sms * 16) blocks = (long)sms * 16;
        scaled_relu_vec4<<<(int)blocks, threads, 0, stream>>>(
            reinterpret_cast<const float4*>(xp), reinterpret_cast<float4*>(yp), (float)scale, n4);
    }
    long rest = n - 4 * n4;
    if (rest > 0) {
        scaled_relu_tail<<<(int)((rest + 255) / 256), 256, 0, stream>>>(xp, yp, (float)scale, 4 * n4, n);
    }
    return y;
}
"""

ext = load_inline(
    name="kp_e2e_scaled_relu_vec4",
    cpp_sources="torch::Tensor scaled_relu(torch::Tensor x, double scale);",
    cuda_sources=cuda_src,
    functions=["scaled_relu"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.scaled_relu(x, self.scale)
