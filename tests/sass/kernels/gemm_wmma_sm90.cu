// Flawed on Hopper: a WMMA (mma.sync) half-precision GEMM built for sm_90. It uses the
// Ampere-style HMMA path; sm_90a's warpgroup MMA (HGMMA) is not used.
#include <mma.h>
#include <cuda_fp16.h>
using namespace nvcuda;
__global__ void hgemm_wmma(const half* A, const half* B, float* C, int M, int N, int K) {
    int warp_m = (blockIdx.y * blockDim.y + threadIdx.y) * 16;
    int warp_n = (blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32) * 16;
    if (warp_m >= M || warp_n >= N) return;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.f);
    for (int k = 0; k < K; k += 16) {
        wmma::load_matrix_sync(a, A + warp_m * K + k, K);
        wmma::load_matrix_sync(b, B + warp_n * K + k, K);
        wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(C + warp_m * N + warp_n, acc, N, wmma::mem_row_major);
}
