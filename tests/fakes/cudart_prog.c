/* cudart_prog.c: the real CUDA runtime's view of the driver it loads. Prints what
 * cudaMalloc and cudaGetDeviceCount return; fake_cuda-t runs it against the fake. */
#include <stdio.h>

#include <cuda_runtime_api.h>

int main(void)
{
    void *p = NULL;
    int count = -1;
    int rc_malloc = (int)cudaMalloc(&p, 1 << 20);
    int rc_count = (int)cudaGetDeviceCount(&count);
    printf("cudaMalloc=%d cudaGetDeviceCount=%d count=%d\n", rc_malloc, rc_count, count);
    if (rc_malloc == 0)
        cudaFree(p);
    return 0;
}
