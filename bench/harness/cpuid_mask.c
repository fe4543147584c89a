/* Hides AVX-512, AVX-VNNI and AMX from every library in the process that
 * asks the CPU what it has, so that one machine measures what a CPU with AVX2
 * and FMA only (AMD Zen 2/3, Intel before Skylake-SP) runs: torch (ATen, oneDNN,
 * MKL) and ONNX Runtime's MLAS each pick kernels from CPUID, and ONNX Runtime
 * has no setting to hold them lower.
 *
 * How: Linux's CPUID faulting (arch_prctl ARCH_SET_CPUID, where the CPU or
 * hypervisor offers it: the "cpuid_fault" flag) makes the CPUID instruction
 * raise SIGSEGV; the handler runs the real CPUID, clears the bits of the
 * hidden instruction sets and resumes after the instruction. Loaded with
 * LD_PRELOAD (bench/avx2_only.py builds and loads it), it is in place before
 * Python imports anything; the setting is per thread and inherited by new
 * threads and forked children, and an exec'd child loads it again.
 *
 * When the mask is in place it sets SPACY_MLM_CPUID_MASK=avx2 in the
 * environment, which `spacy_mlm.machine_info()` records; if the kernel
 * refuses, it says so on stderr and leaves the process as it was. A program
 * that installs its own SIGSEGV handler afterwards (Python's faulthandler)
 * would receive the faults instead: the wrapper turns faulthandler off.
 */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <cpuid.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define BIT(n) (1u << (n))

static int cpuid_faulting(int faulting) { return syscall(SYS_arch_prctl, ARCH_SET_CPUID, faulting ? 0 : 1); }

static void hide(unsigned leaf, unsigned subleaf, unsigned *a, unsigned *b, unsigned *c, unsigned *d) {
    if (leaf == 7 && subleaf == 0) {
        /* AVX512 F, DQ, IFMA, PF, ER, CD, BW, VL */
        *b &= ~(BIT(16) | BIT(17) | BIT(21) | BIT(26) | BIT(27) | BIT(28) | BIT(30) | BIT(31));
        /* AVX512 VBMI, VBMI2, VNNI, BITALG, VPOPCNTDQ */
        *c &= ~(BIT(1) | BIT(6) | BIT(11) | BIT(12) | BIT(14));
        /* AVX512 4VNNIW, 4FMAPS, VP2INTERSECT, FP16; AMX BF16, TILE, INT8 */
        *d &= ~(BIT(2) | BIT(3) | BIT(8) | BIT(22) | BIT(23) | BIT(24) | BIT(25));
    } else if (leaf == 7 && subleaf == 1) {
        /* AVX-VNNI, AVX512_BF16, AMX-FP16, AVX-IFMA */
        *a &= ~(BIT(4) | BIT(5) | BIT(21) | BIT(23));
        /* AVX-VNNI-INT8, AVX-NE-CONVERT, AMX-COMPLEX, AVX-VNNI-INT16, AVX10 */
        *d &= ~(BIT(4) | BIT(5) | BIT(8) | BIT(10) | BIT(19));
    } else if (leaf == 0xd && subleaf == 0) {
        /* the state components of AVX-512 (opmask, ZMM halves, ZMM16-31) and AMX */
        *a &= ~(BIT(5) | BIT(6) | BIT(7) | BIT(17) | BIT(18));
    } else if (leaf == 0x1e || leaf == 0x24) {
        *a = *b = *c = *d = 0; /* AMX tile information, AVX10 */
    }
}

static void on_fault(int signal_number, siginfo_t *info, void *context) {
    ucontext_t *uc = context;
    greg_t *r = uc->uc_mcontext.gregs;
    const unsigned char *ip = (const unsigned char *)r[REG_RIP];
    if (info->si_code != SI_KERNEL || ip[0] != 0x0f || ip[1] != 0xa2) {
        signal(signal_number, SIG_DFL); /* a real fault: the instruction faults again, with the default action */
        return;
    }
    unsigned leaf = (unsigned)r[REG_RAX], subleaf = (unsigned)r[REG_RCX], a, b, c, d;
    cpuid_faulting(0);
    __cpuid_count(leaf, subleaf, a, b, c, d);
    cpuid_faulting(1);
    hide(leaf, subleaf, &a, &b, &c, &d);
    r[REG_RAX] = a, r[REG_RBX] = b, r[REG_RCX] = c, r[REG_RDX] = d;
    r[REG_RIP] += 2;
}

__attribute__((constructor)) static void install(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_fault;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGSEGV, &action, NULL) != 0 || cpuid_faulting(1) != 0) {
        fprintf(stderr, "cpuid_mask: this kernel or CPU offers no CPUID faulting; AVX-512 stays visible\n");
        return;
    }
    setenv("SPACY_MLM_CPUID_MASK", "avx2", 1);
}
