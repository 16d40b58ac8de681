/* attention_d128.cu — the attention kernels for head_dim 128 (attention_kernels.cuh). */
#define ATTN_D 128
#define ATTN_NS attn_d128
#include "attention_kernels.cuh"

attn_kernel_set_t attn_kernels_d128(void) { return attn_d128::kernel_set(); }
