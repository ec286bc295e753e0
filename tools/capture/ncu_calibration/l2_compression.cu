// Does Nsight Compute's "MemoryL2Compression" advice pay on the H200?
//
// The rule fires on most PyTorch kernels of the corpus ("Out of the N bytes sent to the L2
// Compression unit only 0.00% were successfully compressed ... consider marking only those
// memory regions as compressible that contain the most zero values"), with estimated
// speedups of 10-85 %. Its action is an allocation choice: whether a buffer is created
// compressible (cuMemCreate with CU_MEM_ALLOCATION_COMP_GENERIC) or not. This program applies
// it: the same streaming kernel (out = in * s, float4) writes to and reads from buffers
// allocated three ways (cudaMalloc as PyTorch's allocator does, cuMemCreate plain, cuMemCreate
// compressible) holding three kinds of data (random values, all zeros, half zeros as after a
// ReLU), and times each case with CUDA events; the same cases run once more under ncu (mode
// "profile") so that the report shows which of them send bytes to the compression unit and
// what the rule estimates for each.
//
//   nvcc -O3 -arch=sm_90a l2_compression.cu -o l2comp -lcuda
//   ./l2comp time  > timings.jsonl       # one JSON object per case
//   ncu --clock-control none --set full -k regex:stream_scale ./l2comp profile
//
// Nothing here changes clocks, power limits or modes.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            std::exit(1);                                                                      \
        }                                                                                      \
    } while (0)
#define CU(x)                                                                                  \
    do {                                                                                       \
        CUresult r_ = (x);                                                                     \
        if (r_ != CUDA_SUCCESS) {                                                              \
            const char* s_ = nullptr;                                                          \
            cuGetErrorString(r_, &s_);                                                         \
            std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_ ? s_ : "?");     \
            std::exit(1);                                                                      \
        }                                                                                      \
    } while (0)

enum Kind { MALLOC = 0, VMM_PLAIN = 1, VMM_COMPRESSIBLE = 2 };
static const char* kKindName[] = {"cudaMalloc", "vmm_plain", "vmm_compressible"};
enum Data { RANDOM = 0, ZEROS = 1, HALF_ZEROS = 2 };
static const char* kDataName[] = {"random", "zeros", "half_zeros"};

struct Buffer {
    float* ptr = nullptr;
    size_t bytes = 0;
    Kind kind = MALLOC;
    bool compressible_granted = false;
    CUmemGenericAllocationHandle handle = 0;
};

static Buffer allocate(size_t bytes, Kind kind, int device) {
    Buffer b;
    b.kind = kind;
    if (kind == MALLOC) {
        CK(cudaMalloc(&b.ptr, bytes));
        b.bytes = bytes;
        return b;
    }
    CUmemAllocationProp prop;
    std::memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    if (kind == VMM_COMPRESSIBLE) prop.allocFlags.compressionType = CU_MEM_ALLOCATION_COMP_GENERIC;
    size_t gran = 0;
    CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    b.bytes = (bytes + gran - 1) / gran * gran;
    CU(cuMemCreate(&b.handle, b.bytes, &prop, 0));
    CUmemAllocationProp got;
    std::memset(&got, 0, sizeof(got));
    CU(cuMemGetAllocationPropertiesFromHandle(&got, b.handle));
    b.compressible_granted = got.allocFlags.compressionType == CU_MEM_ALLOCATION_COMP_GENERIC;
    CUdeviceptr va = 0;
    CU(cuMemAddressReserve(&va, b.bytes, 0, 0, 0));
    CU(cuMemMap(va, b.bytes, 0, b.handle, 0));
    CUmemAccessDesc access;
    std::memset(&access, 0, sizeof(access));
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU(cuMemSetAccess(va, b.bytes, &access, 1));
    b.ptr = reinterpret_cast<float*>(va);
    return b;
}

static void release(Buffer& b) {
    if (b.kind == MALLOC) {
        CK(cudaFree(b.ptr));
    } else {
        CUdeviceptr va = reinterpret_cast<CUdeviceptr>(b.ptr);
        CU(cuMemUnmap(va, b.bytes));
        CU(cuMemAddressFree(va, b.bytes));
        CU(cuMemRelease(b.handle));
    }
    b.ptr = nullptr;
}

__device__ __forceinline__ unsigned mix(unsigned x) {
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

__global__ void fill(float* p, size_t n, int data, unsigned seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = mix((unsigned)i * 2654435761U ^ seed);
        float v = (h >> 8) * (1.0f / 16777216.0f) * 2.0f - 1.0f;  // uniform in [-1, 1)
        if (data == ZEROS) v = 0.0f;
        if (data == HALF_ZEROS) v = v > 0.0f ? v : 0.0f;  // as after a ReLU
        p[i] = v;
    }
}

// the kernel under test: a streaming read of `in` and write of `out` (16 bytes per thread a step)
__global__ void stream_scale(const float4* __restrict__ in, float4* __restrict__ out, size_t n4, float s) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        float4 v = in[i];
        v.x *= s;
        v.y *= s;
        v.z *= s;
        v.w *= s;
        out[i] = v;
    }
}

int main(int argc, char** argv) {
    const bool profile = argc > 1 && std::strcmp(argv[1], "profile") == 0;
    const size_t n = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : (size_t)64 << 20;  // floats: 256 MiB
    const int reps = profile ? 1 : 40;
    int device = 0;
    CK(cudaSetDevice(device));
    CK(cudaFree(nullptr));  // the primary context, current for the driver calls
    int supported = 0;
    CU(cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED, device));
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    std::fprintf(stderr, "generic compression supported: %d, SMs: %d, bytes per buffer: %zu\n", supported, sms,
                 n * sizeof(float));
    // (source kind, destination kind): the destination's allocation is what the rule asks about
    // for writes, the source's for reads
    const Kind pairs[][2] = {{MALLOC, MALLOC},           {MALLOC, VMM_PLAIN},           {MALLOC, VMM_COMPRESSIBLE},
                             {VMM_PLAIN, VMM_PLAIN},     {VMM_COMPRESSIBLE, VMM_PLAIN}, {VMM_COMPRESSIBLE,
                                                                                        VMM_COMPRESSIBLE}};
    const int grid = sms * 8, block = 256;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int d = 0; d < 3; ++d) {
        for (const auto& pr : pairs) {
            Buffer in = allocate(n * sizeof(float), pr[0], device);
            Buffer out = allocate(n * sizeof(float), pr[1], device);
            fill<<<grid, block>>>(in.ptr, n, d, 12345u);
            // the destination holds data of the same kind before the kernel overwrites it
            fill<<<grid, block>>>(out.ptr, n, d, 777u);
            CK(cudaGetLastError());
            CK(cudaDeviceSynchronize());
            std::vector<float> ms;
            for (int r = 0; r < (profile ? 0 : 5); ++r)
                stream_scale<<<grid, block>>>((const float4*)in.ptr, (float4*)out.ptr, n / 4, 1.0f);
            for (int r = 0; r < reps; ++r) {
                CK(cudaEventRecord(e0));
                stream_scale<<<grid, block>>>((const float4*)in.ptr, (float4*)out.ptr, n / 4, 1.0f);
                CK(cudaEventRecord(e1));
                CK(cudaEventSynchronize(e1));
                float t = 0;
                CK(cudaEventElapsedTime(&t, e0, e1));
                ms.push_back(t);
            }
            CK(cudaGetLastError());
            std::sort(ms.begin(), ms.end());
            const float med = ms[ms.size() / 2];
            std::printf("{\"data\": \"%s\", \"src\": \"%s\", \"dst\": \"%s\", \"src_compressible\": %s, "
                        "\"dst_compressible\": %s, \"bytes\": %zu, \"reps\": %d, \"median_ms\": %.5f, "
                        "\"min_ms\": %.5f, \"max_ms\": %.5f, \"gb_per_s\": %.1f}\n",
                        kDataName[d], kKindName[pr[0]], kKindName[pr[1]], in.compressible_granted ? "true" : "false",
                        out.compressible_granted ? "true" : "false", 2 * n * sizeof(float), reps, med, ms.front(),
                        ms.back(), 2.0 * n * sizeof(float) / (med * 1e-3) / 1e9);
            std::fflush(stdout);
            release(in);
            release(out);
        }
    }
    return 0;
}
