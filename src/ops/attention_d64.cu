/* attention_d64.cu — the attention kernels for head_dim 64 (attention_kernels.cuh). */
#define ATTN_D 64
#define ATTN_NS attn_d64
#include "attention_kernels.cuh"

attn_kernel_set_t attn_kernels_d64(void) { return attn_d64::kernel_set(); }
